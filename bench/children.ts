import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pinLoad, pinServer } from './pinning.js';
export { freeLoopbackPort as freePort } from '../test/helpers/nats-server.js';

/** Starts a server-side bench helper (beside this file, on the servers' core) that prints its port on its first line. */
export function startChild(script: string, args: string[] = [], nodeFlags: readonly string[] = []): Promise<{ port: number; proc: ChildProcess; stop(): void }> {
  const proc = spawn(process.execPath, [...nodeFlags, fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  pinServer(proc.pid);
  return new Promise((resolve) => proc.stdout!.once('data', (d) => resolve({ port: Number(String(d).trim()), proc, stop: () => proc.kill('SIGKILL') })));
}

/** Resident memory of a process, in KiB (Linux). */
export function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

/** Broadcast receivers spread over `processes` load-side processes (`ws-receivers.js`), `perProcess` connections each. */
export async function startReceivers(processes: number, perProcess: number, url: string, headers: Record<string, string>): Promise<{ received(): Promise<number>; stop(): void }> {
  const script = fileURLToPath(new URL('./ws-receivers.js', import.meta.url));
  const procs = Array.from({ length: processes }, () => spawn(process.execPath, [script, url, String(perProcess), JSON.stringify(headers)], { stdio: ['pipe', 'pipe', 'inherit'] }));
  for (const p of procs) pinLoad(p.pid);
  const lines = procs.map(lineReader);
  await Promise.all(lines.map((next) => next())); // every process: "ready"
  return {
    received: async () => {
      const answers = lines.map((next) => next());
      for (const p of procs) p.stdin!.write('count\n');
      return (await Promise.all(answers)).reduce((n, line) => n + Number(line), 0);
    },
    stop: () => {
      for (const p of procs) {
        p.stdin!.write('close\n');
        setTimeout(() => p.kill('SIGKILL'), 2_000).unref();
      }
    },
  };
}


/** A helper's stdout as lines, one per call of the function returned (each line goes to one caller, in order). */
export function lineReader(proc: ChildProcess): () => Promise<string> {
  let buffer = '';
  const waiting: Array<(line: string) => void> = [];
  proc.stdout!.on('data', (d) => {
    buffer += d;
    for (let i = buffer.indexOf('\n'); i >= 0; i = buffer.indexOf('\n')) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      waiting.shift()?.(line);
    }
  });
  return () => new Promise<string>((resolve) => waiting.push(resolve));
}
