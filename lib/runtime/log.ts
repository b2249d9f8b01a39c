import { spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { destination, pino, type Logger } from 'pino';
import { currentTrace } from '../../bus/trace.js';

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
      // A line written inside a traced request names its trace (W3C trace id), to find it among the spans.
      mixin: () => {
        const t = currentTrace();
        return t ? { trace_id: t.traceparent.slice(3, 35) } : {};
      },
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

/** The write end of a pipe to a `cat` that writes to this process's stdout; undefined when none could start. */
function relayThroughChild(): number | undefined {
  if (!existsSync('/bin/sh') || !existsSync('/bin/cat')) return undefined;
  try {
    // It ignores the stop signals a terminal or a supervisor sends the whole group, so the stop's own
    // log lines still get through; it ends when the pipe closes (this process exited or was killed).
    const relay = spawn('/bin/sh', ['-c', "trap '' INT TERM HUP; exec /bin/cat"], { stdio: ['pipe', 'inherit', 'ignore'], detached: true });
    relay.on('error', () => undefined);
    // Not a reason to stay alive, and not this process's to wait for: it ends with the pipe.
    relay.unref();
    const pipe = relay.stdin as unknown as { _handle?: { fd?: number; unref?: () => void } };
    pipe._handle?.unref?.();
    const fd = pipe._handle?.fd;
    return typeof fd === 'number' && fd > 2 ? fd : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether stdout reopened on its own lands where the writers sharing descriptor 1 write. A file opened
 * without O_APPEND (`npm start > file`, the shell's `>`) does not: its writers share one offset
 * (npm's own lines, a `2>&1` stderr), which a second opening of the file does not move, so the
 * first line they wrote after ours (the stop's `pier: SIGTERM: stopping`) landed over our first log
 * line. Such a file gets the relay, whose `cat` writes through descriptor 1 itself.
 */
function reopenKeepsOrder(): boolean {
  if (!fstatSync(1).isFile()) return true;
  // `flags:` is octal; O_APPEND is 02000 on Linux (the only system with /proc/self/fd to reopen).
  const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/fdinfo/1', 'utf8'))?.[1];
  return flags !== undefined && (parseInt(flags, 8) & 0o2000) !== 0;
}

/**
 * Keeps stdout for JSON lines only. The native uWebSockets.js build prints debug text (`finding
 * *.alice.localhost`, `Browsed to SNI: …`) with printf on file descriptor 1, at start and at each
 * certificate reload. So the logs get a descriptor of their own on the same stdout (the pipe, file
 * opened for appending or terminal reopened through /proc/self/fd/1), and descriptor 1 itself becomes
 * /dev/null (close it, and the next open takes the lowest free number). Only for `pier start`, before
 * anything touched `process.stdout`. A socket (journald, a supervisor's socket pair) cannot be
 * reopened, and a file written at its own offset must not be (reopenKeepsOrder): then
 * a `cat` child inherits it (the kernel's copy of the descriptor, which Node cannot make itself) and
 * relays the logs from a pipe; it ends when this process's end closes the pipe.
 */
export function logDestinationApartFromNativeOutput(): NodeJS.WritableStream | undefined {
  let fd: number | undefined;
  try {
    if (!reopenKeepsOrder()) throw new Error('a file written at its own offset');
    fd = openSync('/proc/self/fd/1', 'a');
  } catch {
    fd = relayThroughChild();
    if (fd === undefined) return undefined;
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
