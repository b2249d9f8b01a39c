import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { SINGLE_THREADED_GC } from '../lib/runtime/gc-threads.js';

/**
 * The fair method (issue #14): every server process of a measurement — Pier and its peer alike, and
 * what they need (NATS, the app, the upstream) — runs on one core, the load generator (this process
 * and its client helpers) on the other. On a 2-core machine anything else measures the scheduler.
 * `taskset -a -p` moves every thread of a process (libuv's pool and worker threads included);
 * threads and processes started later inherit it.
 */
export const SERVER_CPU = 0;

/**
 * Node flags of every server-side process of a measurement, Pier's and its floor's alike, each
 * pinned to one core: V8's GC helper threads on that same core make a collection wait a scheduler
 * slice for them (docs/operations.md, "One CPU per process", the advice Pier gives an operator).
 */
export const SERVER_NODE_FLAGS: readonly string[] = [SINGLE_THREADED_GC];
export const LOAD_CPU = 1;

function tasksetWorks(): boolean {
  if (cpus().length < 2) return false;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const usable = tasksetWorks();

function pin(pid: number | undefined, cpu: number): void {
  if (!usable || pid === undefined) return;
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
}

/** Puts a server-side process (Pier, a peer, NATS, the app) on the servers' core. */
export const pinServer = (pid: number | undefined) => pin(pid, SERVER_CPU);

/** Puts a load-generating process (this one, or a client helper) on the load generator's core. */
export const pinLoad = (pid: number | undefined) => pin(pid, LOAD_CPU);

/** What the JSON says of the method. */
export function pinning(): Record<string, unknown> {
  return usable
    ? { method: 'taskset -a -p', server_processes_cpu: SERVER_CPU, load_generator_cpu: LOAD_CPU, load_generator_node_flags: process.execArgv, note: 'Pier and its peer each measured alone on the server core' }
    : { method: 'none', note: 'taskset or a second core is missing: server and load share the cores, figures are not comparable with pinned runs' };
}
