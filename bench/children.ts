import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Starts a bench helper script (beside this file) that prints its port on its first line. */
export function startChild(script: string, args: string[] = []): Promise<{ port: number; proc: ChildProcess; stop(): void }> {
  const proc = spawn(process.execPath, [fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve) => proc.stdout!.once('data', (d) => resolve({ port: Number(String(d).trim()), proc, stop: () => proc.kill('SIGKILL') })));
}

/** Resident memory of a process, in KiB (Linux). */
export function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}
