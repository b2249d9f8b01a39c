import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { freeLoopbackPort } from './nats-server.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = join(ROOT, 'bin', 'pier.js');

import type { Ports } from '../../lib/config/config.js';
import { patience } from './time.js';

export function tempDir(prefix = 'pier-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Environment for a Pier process on random ports, a given data dir and (optionally) NATS. */
export function pierEnv(dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('PIER_') && k !== 'NATS_URL') env[k] = v;
  return {
    ...env,
    PIER_DATA_DIR: dataDir,
    PIER_PUBLIC_PORT: '0',
    PIER_SYSTEM_PORT: '0',
    PIER_LOCAL_PORT: '0',
    PIER_UPLOAD_PORT: '0',
    PIER_ADMIN_PORT: '0',
    PIER_LOG_LEVEL: 'info',
    // What the in-process bus shares by reference is frozen in tests (bus/freeze.ts), not in benchmarks.
    ...(process.env.PIER_FREEZE_SHARED ? { PIER_FREEZE_SHARED: process.env.PIER_FREEZE_SHARED } : {}),
    ...extra,
  };
}

/**
 * Concrete ports for every listener, for a Pier that will be restarted on the same ports. Not 0:
 * uWS sets SO_REUSEADDR only on a listener given a port, so the connections of a listener bound to
 * port 0 hold that port in TIME_WAIT against the restart for a minute.
 */
export async function fixedPorts(): Promise<Record<string, string>> {
  const names = ['PIER_PUBLIC_PORT', 'PIER_SYSTEM_PORT', 'PIER_LOCAL_PORT', 'PIER_UPLOAD_PORT', 'PIER_ADMIN_PORT'];
  const ports = new Set<number>();
  while (ports.size < names.length) ports.add(await freeLoopbackPort());
  const list = [...ports];
  return Object.fromEntries(names.map((n, i) => [n, String(list[i])]));
}

/** A `pier start` child process; resolves once it logged "pier ready" (with its ports). */
export class PierProcess {
  logs = '';
  /** Everything the process wrote on stderr (its one-line errors, crashes). */
  stderr = '';
  private constructor(
    readonly proc: ChildProcess,
    readonly ports: Ports | null,
    readonly env: Record<string, string>,
  ) {}

  /** The `instance` label of this process's metrics. */
  get instance(): string {
    return /"instance":"([^"]+)"/.exec(this.logs)?.[1] ?? '';
  }

  get adminUrl(): string {
    return `http://127.0.0.1:${this.ports!.admin}`;
  }

  static start(env: Record<string, string>, args: string[] = [], idleMs = 20_000): Promise<PierProcess> {
    const timeoutMs = patience(idleMs);
    // PIER_NODE_FLAGS go to node itself: the child env's (a benchmark's choice) and this process's
    // (profiling a benchmark: "--cpu-prof --cpu-prof-dir=/tmp/prof"), each flag once.
    const nodeFlags = [...new Set([env.PIER_NODE_FLAGS, process.env.PIER_NODE_FLAGS].join(' ').split(' ').filter(Boolean))];
    const proc = spawn(process.execPath, [...nodeFlags, BIN, 'start', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    return new Promise((resolve, reject) => {
      let out = '';
      let err = '';
      const timer = setTimeout(() => {
        // Starved or stuck? (A CI run once saw a start print nothing at all in 20 s.)
        const where = processState(proc.pid);
        proc.kill('SIGKILL');
        reject(new Error(`pier did not become ready in ${timeoutMs} ms (${where}):\n${out}\n${err}`));
      }, timeoutMs);
      proc.stderr!.on('data', (d) => (err += d));
      proc.stdout!.on('data', (d) => {
        out += d;
        for (const line of out.split('\n')) {
          if (!line.includes('"pier ready"')) continue;
          clearTimeout(timer);
          const p = new PierProcess(proc, JSON.parse(line).ports, env);
          p.logs = out;
          p.stderr = err;
          proc.stdout!.removeAllListeners('data');
          proc.stdout!.on('data', (d) => (p.logs += d));
          proc.stderr!.removeAllListeners('data');
          proc.stderr!.on('data', (d) => (p.stderr += d));
          proc.removeAllListeners('exit');
          resolve(p);
          return;
        }
      });
      proc.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`pier exited with ${code} before ready:\n${out}\n${err}`));
      });
    });
  }

  /** What a failing test should show of this process: whether it is still running, its last warnings and errors, its stderr. */
  report(): string {
    const state = this.proc.exitCode !== null || this.proc.signalCode !== null ? `exited (code ${this.proc.exitCode}, signal ${this.proc.signalCode})` : 'running';
    const notable = this.logs.split('\n').filter((line) => /"level":(40|50|60)/.test(line));
    return `pier ${state}; warnings and errors (${notable.length}, the last 30):\n${notable.slice(-30).join('\n')}\nstderr (the last 4,000 characters):\n${this.stderr.slice(-4000)}`;
  }

  /** Graceful stop (SIGTERM); resolves with the exit code once its output is read to the end ('close': 'exit' may come before the last lines). */
  stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve(this.proc.exitCode);
    return new Promise((resolve) => {
      this.proc.once('close', (code) => resolve(code));
      this.proc.kill(signal);
    });
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

/** Runs the `pier` CLI as a user would, against an admin URL and token. */
export function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    proc.on('exit', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

export function cleanup(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** `pier start` expected to fail: its exit code and everything it wrote on stderr (within 20 s). */
export function failedStart(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, 'start', ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error('timed out after 20000 ms waiting for pier to exit'));
    }, 20_000);
    let stderr = '';
    p.stderr!.on('data', (d) => (stderr += d));
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

/** A process's state, CPU time and kernel wait channel (Linux), for a start that never became ready. */
function processState(pid: number | undefined): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const wchan = readFileSync(`/proc/${pid}/wchan`, 'utf8');
    return `state ${fields[0]}, ${ticks * 10} ms of CPU, waiting in ${wchan || '-'}`;
  } catch {
    return 'no process state';
  }
}
