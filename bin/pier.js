#!/usr/bin/env node
// The `pier` command. The TypeScript sources are compiled to dist/ by `npm run build`
// (npm start and npm test do it for you).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (!existsSync(entry)) {
  process.stderr.write('pier: not built yet; run `npm run build` (or `npm start`) in the checkout first\n');
  process.exit(1);
}
const { main } = await import(entry);
const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
