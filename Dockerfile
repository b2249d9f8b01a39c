# The one image every Pier service runs; the role is chosen by the command (see docker-compose.yml).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev
ENV PIER_DATA_DIR=/data
VOLUME /data
ENTRYPOINT ["node", "bin/pier.js"]
CMD ["start"]
