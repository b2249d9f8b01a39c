import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../test/helpers/pier.js';

/** This checkout's build: what a process runs unless told another (an upgrade runs two). */
export const THIS_BUILD: Build = { name: 'this', bin: join(ROOT, 'bin', 'pier.js') };
/** What a process's output is kept of (its last lines, for a failure's report): bounded. */
const TAIL_BYTES = 16 * 1024;
const READY_MS = 60_000;

/** A build of Pier a process can run: a name for the history, and its `bin/pier.js`. */
export interface Build {
  name: string;
  bin: string;
}

/**
 * One Pier process of the chaos cluster: started, killed, paused and started again on the same
 * ports and data folder. An exit the fault injector did not cause is recorded (`onUnexpectedExit`):
 * the checker fails the run for it.
 */
export class ChaosProcess {
  private proc: ChildProcess | null = null;
  private tail = '';
  /** The injector killed or stopped it: its exit is expected. */
  private expectingExit = false;
  paused = false;
  ports: Record<string, number> | null = null;
  /** Every bus id its starts said (their "pier ready" lines; a process of a release before it says none): a connection id begins with its edge's. */
  readonly busIds = new Set<string>();
  /** What the next start runs; switched between a stop and a start (a rolling upgrade). */
  build: Build = THIS_BUILD;

  /** Everything the process wrote, across its restarts (for reading a failure afterwards); null: not kept. */
  private readonly log: WriteStream | null;

  constructor(
    readonly name: string,
    readonly roles: string,
    private readonly env: Record<string, string>,
    private readonly onUnexpectedExit: (p: ChaosProcess, code: number | null, signal: string | null, tail: string) => void,
    logPath: string | null = null,
  ) {
    this.log = logPath ? createWriteStream(logPath, { flags: 'a' }) : null;
  }

  /** Stops keeping the log (after the run). */
  closeLog(): void {
    this.log?.end();
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Starts it and resolves once it logged "pier ready". */
  start(): Promise<void> {
    this.expectingExit = false;
    this.paused = false;
    this.tail = '';
    const proc = spawn(process.execPath, [this.build.bin, 'start', '--roles', this.roles], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    this.log?.write(`--- start ${new Date().toISOString()} (build ${this.build.name})\n`);
    const keep = (d: Buffer) => {
      this.tail = (this.tail + d.toString()).slice(-TAIL_BYTES);
      this.log?.write(d);
    };
    proc.stderr!.on('data', keep);
    return new Promise((resolve, reject) => {
      let pending = '';
      let ready = false;
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`${this.name} did not become ready in ${READY_MS} ms: ${this.tail.slice(-2000)}`));
      }, READY_MS);
      proc.stdout!.on('data', (d: Buffer) => {
        keep(d);
        if (ready) return;
        pending += d.toString();
        const line = pending.split('\n').find((l) => l.includes('"pier ready"'));
        if (line === undefined) {
          pending = pending.slice(-TAIL_BYTES);
          return;
        }
        ready = true;
        pending = '';
        clearTimeout(timer);
        const said = JSON.parse(line) as { ports: Record<string, number> | null; busId?: unknown };
        this.ports = said.ports;
        if (typeof said.busId === 'string') this.busIds.add(said.busId);
        resolve();
      });
      proc.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready) reject(new Error(`${this.name} exited (${code ?? signal}) before ready: ${this.tail.slice(-2000)}`));
        else if (!this.expectingExit) this.onUnexpectedExit(this, code, signal, this.tail);
      });
    });
  }

  /** kill -9: no goodbye, no flush. */
  kill(): Promise<void> {
    return this.signalExit('SIGKILL');
  }

  /** A graceful stop (SIGTERM): what an operator draining the process does. */
  drain(): Promise<void> {
    return this.signalExit('SIGTERM');
  }

  pause(): void {
    if (!this.running || this.paused) return;
    this.paused = true;
    this.proc!.kill('SIGSTOP');
  }

  resume(): void {
    if (!this.running || !this.paused) return;
    this.paused = false;
    this.proc!.kill('SIGCONT');
  }

  /** Resident memory in KiB (Linux), or null when it is not running. */
  rssKiB(): number | null {
    if (!this.running) return null;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.proc!.pid}/status`, 'utf8'));
      return m ? Number(m[1]) : null;
    } catch {
      return null;
    }
  }

  private signalExit(signal: NodeJS.Signals): Promise<void> {
    const proc = this.proc;
    if (!proc || !this.running) return Promise.resolve();
    this.expectingExit = true;
    return new Promise((resolve) => {
      proc.once('exit', () => resolve());
      if (this.paused) proc.kill('SIGCONT');
      this.paused = false;
      proc.kill(signal);
    });
  }
}
