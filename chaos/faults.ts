import type { ChaosCluster } from './cluster.js';
import type { ChaosProcess } from './processes.js';
import type { History } from './history.js';
import type { Rng } from './random.js';
import { FaultGate, powerCutLane } from './power-cut.js';
import type { PowerCutDisks } from '../test/helpers/power-cut-disks.js';

export type FaultKind = 'kill -9' | 'pause' | 'drain' | 'nats restart' | 'power cut';

export interface FaultContext {
  cluster: ChaosCluster;
  history: History;
  rng: Rng;
  /** No fault starts after this (ms since the epoch); the one running then is finished. */
  deadline: number;
  log: (message: string) => void;
  /** With a power-cut disk under the cluster's state, a third lane cuts the power of every node (power-cut.ts). */
  disk?: PowerCutDisks;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The fault injector, driven by the seed: two lanes, one for Pier processes and one for NATS nodes,
 * each injecting one fault at a time with a random gap. A Pier fault is a kill -9 (restarted after
 * a random pause, on the same ports and data), a SIGSTOP/SIGCONT pause of a few seconds, or an
 * edge drained (SIGTERM) and started again. A NATS fault kills one node (-9) and restarts it with
 * its data after a random pause: at most one node is down at a time, so JetStream keeps its quorum.
 * Every fault is in the history with its target and times.
 */
export async function injectFaults(ctx: FaultContext): Promise<void> {
  const gate = new FaultGate();
  // A lane that fails stops (the history says why: the processes check fails the run), the others go on.
  const lane = (name: string, run: Promise<void>) =>
    run.catch((err: unknown) => {
      ctx.history.info('fault', 'lane failed', { target: name, error: String((err as Error)?.stack ?? err).slice(0, 2000) });
      ctx.log(`fault lane ${name} failed: ${String((err as Error)?.message ?? err)}`);
    });
  await Promise.all([lane('pier', pierLane(ctx, gate)), lane('nats', natsLane(ctx, gate)), ctx.disk ? lane('power', powerCutLane(ctx, ctx.disk, gate)) : Promise.resolve()]);
}

async function pierLane(ctx: FaultContext, gate: FaultGate): Promise<void> {
  const rng = ctx.rng.fork('pier');
  const names = [...ctx.cluster.processes.keys()];
  for (let i = 0; i < 10_000 && Date.now() < ctx.deadline; i++) {
    await sleep(rng.int(1_000, 4_000));
    if (Date.now() >= ctx.deadline) break;
    const target = ctx.cluster.processes.get(rng.pick(names))!;
    const roll = rng.next();
    const kind: FaultKind = target.roles === 'edge' && roll < 0.2 ? 'drain' : roll < 0.6 ? 'kill -9' : 'pause';
    const downMs = rng.int(500, 3_000);
    await gate.shared(() => pierFault(ctx, target.name, kind, downMs));
  }
}

async function pierFault(ctx: FaultContext, name: string, kind: FaultKind, downMs: number): Promise<void> {
  const target = ctx.cluster.processes.get(name)!;
  ctx.history.info('fault', kind, { target: target.name, roles: target.roles, downMs });
  ctx.log(`fault: ${kind} ${target.name} for ${downMs} ms`);
  if (kind === 'pause') {
    target.pause();
    await sleep(downMs);
    target.resume();
  } else {
    await (kind === 'drain' ? target.drain() : target.kill());
    ctx.history.info('fault', 'down', { target: target.name, roles: target.roles, fault: kind });
    await sleep(downMs);
    await restartPier(ctx, target.name);
  }
  ctx.history.info('fault', 'healed', { target: target.name, fault: kind });
}

async function natsLane(ctx: FaultContext, gate: FaultGate): Promise<void> {
  const rng = ctx.rng.fork('nats');
  const nodes = ctx.cluster.bus.nodes;
  for (let i = 0; i < 10_000 && Date.now() < ctx.deadline; i++) {
    await sleep(rng.int(4_000, 10_000));
    if (Date.now() >= ctx.deadline) break;
    const index = rng.int(0, nodes.length - 1);
    const downMs = rng.int(500, 3_000);
    await gate.shared(async () => {
      ctx.history.info('fault', 'nats restart', { target: `nats-${index + 1}`, downMs });
      ctx.log(`fault: nats-${index + 1} kill -9, back after ${downMs} ms`);
      await nodes[index].restart(downMs);
      ctx.history.info('fault', 'healed', { target: `nats-${index + 1}`, fault: 'nats restart' });
      // The node catches up with its streams before the next NATS fault (quorum is kept throughout).
      await sleep(2_000);
    });
  }
}

/** How long a restart may take, from its first try to "pier ready", before it counts as an outage. */
export const RESTART_READY_MS = 60_000;

/** What the history keeps of a failed start: its head (what failed) and its tail (the process's last words). */
function startFailure(err: unknown): string {
  const message = String((err as Error).message);
  return message.length <= 800 ? message : `${message.slice(0, 300)} … ${message.slice(-500)}`;
}

/**
 * Starts a process again; a start that fails is tried again, as a supervisor would (its ports may
 * linger a moment; a process may give up its own start wait while NATS has no quorum for its
 * state). Each failed try is recorded; the restart is an outage (`restart failed`, which the
 * processes check reports) when it was not ready within RESTART_READY_MS of its first try, or
 * never: after 5 tries the run goes on without it, and its checks say what that cost.
 */
export async function restartProcess(history: History, p: ChaosProcess): Promise<void> {
  const began = Date.now();
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      await p.start();
      const readyAfterMs = Date.now() - began;
      if (readyAfterMs > RESTART_READY_MS) history.info('fault', 'restart failed', { target: p.name, attempt, readyAfterMs, error: `ready only ${readyAfterMs} ms after the first try` });
      else if (attempt > 1) history.info('fault', 'restart retried', { target: p.name, attempts: attempt, readyAfterMs });
      return;
    } catch (err) {
      history.info('fault', attempt === 5 ? 'restart failed' : 'restart try failed', { target: p.name, attempt, error: startFailure(err) });
      await sleep(1_000);
    }
  }
}

async function restartPier(ctx: FaultContext, name: string): Promise<void> {
  await restartProcess(ctx.history, ctx.cluster.processes.get(name)!);
}

/** Samples every process's resident memory into the history (the checker looks for growth without bound). */
export function sampleMemory(cluster: ChaosCluster, history: History, everyMs: number): () => void {
  const timer = setInterval(() => {
    for (const p of cluster.processes.values()) {
      const kib = p.rssKiB();
      if (kib !== null) history.info('process', 'rss', { target: p.name, kib, pid: p.pid });
    }
  }, everyMs);
  return () => clearInterval(timer);
}
