import { closeSync, openSync } from 'node:fs';
import { Writable } from 'node:stream';
import { destination, pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout (one object per line). Fields that could carry secrets are
 * redacted by name as a second line of defence; the first is never logging them.
 */
export function createLogger(options: { level: string; name: string; destination?: NodeJS.WritableStream; pretty?: boolean }): Logger {
  const out = options.destination ?? process.stdout;
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
    (options.pretty ? humanLines(out) : out) as any,
  );
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/**
 * `PIER_LOG_FORMAT=pretty`: each JSON line as `time LEVEL message key=value ...`, for a person at a
 * terminal (the JSON lines stay the default, for machines). The same redaction applies: this only
 * reformats what pino already wrote.
 */
export function humanLines(out: NodeJS.WritableStream): NodeJS.WritableStream {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue;
        let rec: Record<string, unknown>;
        try {
          rec = JSON.parse(line);
        } catch {
          out.write(`${line}\n`);
          continue;
        }
        const { time, level, msg, pid: _pid, name: _name, hostname: _host, ...rest } = rec;
        const fields = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
        out.write(`${new Date(Number(time)).toISOString().slice(11, 23)} ${(LEVELS[Number(level)] ?? String(level)).padEnd(5)} ${String(msg ?? '')}${fields.length ? `  ${fields.join(' ')}` : ''}\n`);
      }
      done();
    },
  });
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
