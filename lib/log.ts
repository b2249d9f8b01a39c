import { closeSync, openSync } from 'node:fs';
import { destination, pino, type Logger } from 'pino';

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

/**
 * Keeps stdout for JSON lines only. The native uWebSockets.js build prints debug text (`finding
 * *.alice.localhost`, `Browsed to SNI: …`) with printf on file descriptor 1, at start and at each
 * certificate reload. So the logs get a descriptor of their own on the same stdout (the pipe, file
 * or terminal reopened through /proc/self/fd/1), and descriptor 1 itself becomes /dev/null (close
 * it, and the next open takes the lowest free number). Only for `pier start`, before anything
 * touched `process.stdout`; where stdout cannot be reopened (a socket), nothing changes.
 */
export function logDestinationApartFromNativeOutput(): NodeJS.WritableStream | undefined {
  let fd: number;
  try {
    fd = openSync('/proc/self/fd/1', 'a');
  } catch {
    return undefined;
  }
  try {
    closeSync(1);
    const devNull = openSync('/dev/null', 'w');
    if (devNull !== 1) closeSync(devNull);
  } catch {
    // fd 1 is gone or not /dev/null: the logs still have their own descriptor.
  }
  return destination({ fd, sync: true }) as unknown as NodeJS.WritableStream;
}
