import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout (one object per line). Fields that could carry secrets are
 * redacted by name as a second line of defence; the first is never logging them.
 */
export function createLogger(options: { level: string; name: string; destination?: NodeJS.WritableStream }): Logger {
  return pino(
    {
      name: options.name,
      level: options.level,
      base: { pid: process.pid },
      redact: {
        paths: ['token', 'appSecret', 'secret', 'value', 'password', '*.token', '*.appSecret', '*.secret', '*.value', 'headers.authorization', 'headers["x-authorization"]', 'headers.cookie'],
        censor: '[redacted]',
      },
    },
    (options.destination ?? process.stdout) as any,
  );
}
