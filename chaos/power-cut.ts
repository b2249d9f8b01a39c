import type { PowerCutDisks } from '../test/helpers/power-cut-disks.js';
import type { FaultContext } from './faults.js';
import { restartProcess } from './faults.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How long a NATS node may take to accept connections again after a cut (every node recovers its store at once). */
const NATS_BACK_MS = 60_000;

/**
 * Lets the ordinary faults (one process or one NATS node at a time) and the power cuts (everything
 * at once) take turns: a fault runs while no cut does; a cut waits for the faults running to end and
 * holds new ones back until every node is up again.
 */
export class FaultGate {
  private running = 0;
  private cutting: Promise<void> | null = null;

  async shared<T>(fault: () => Promise<T>): Promise<T> {
    while (this.cutting) await this.cutting;
    this.running++;
    try {
      return await fault();
    } finally {
      this.running--;
    }
  }

  async exclusive<T>(cut: () => Promise<T>): Promise<T> {
    while (this.cutting) await this.cutting;
    let done = () => undefined as void;
    this.cutting = new Promise<void>((resolve) => (done = resolve));
    try {
      for (let waited = 0; this.running > 0; waited += 50) {
        // A restart tries 5 times, each up to its 60 s ready deadline (faults.ts restartProcess).
        if (waited > 6 * 60_000) throw new Error(`a power cut waited 6 min for ${this.running} fault(s) to end`);
        await sleep(50);
      }
      return await cut();
    } finally {
      this.cutting = null;
      done();
    }
  }
}

/**
 * The power-cut lane: 20–40 s (seeded) after the last one was over, every node goes off at once —
 * the three NATS servers and every Pier process, killed -9 together — the disks drop what was not
 * synced, and after a moment of darkness everything starts again (NATS nodes, then the registry,
 * then every other process). Each cut prints `power cut: …` lines. In the history it is a `power
 * cut` line, then what it is to each node — a kill -9 of each Pier process and a restart of each
 * NATS node (`cause: 'power cut'`), with their `down` and `healed` lines — so every checker judges
 * it as it judges those faults, and the checkers decide whether anything acknowledged was lost.
 */
export async function powerCutLane(ctx: FaultContext, disk: PowerCutDisks, gate: FaultGate): Promise<void> {
  const rng = ctx.rng.fork('power');
  const { cluster, history } = ctx;
  for (let n = 1; n <= 10_000 && Date.now() < ctx.deadline; n++) {
    await sleep(rng.int(20_000, 40_000));
    if (Date.now() >= ctx.deadline) break;
    const darkMs = rng.int(500, 3_000);
    await gate.exclusive(async () => {
      const started = Date.now();
      const processes = [...cluster.processes.values()];
      const nodes = cluster.bus.nodes.map((node, i) => ({ node, name: `nats-${i + 1}` }));
      history.info('fault', 'power cut', { target: 'every node', n, darkMs });
      for (const p of processes) history.info('fault', 'kill -9', { target: p.name, roles: p.roles, downMs: darkMs, cause: 'power cut' });
      for (const { name } of nodes) history.info('fault', 'nats restart', { target: name, downMs: darkMs, cause: 'power cut' });
      ctx.log(`power cut: #${n}: every node off at once (${nodes.length} NATS servers, ${processes.length} Pier processes)`);
      await Promise.all([...processes.map((p) => p.kill()), ...nodes.map(({ node }) => node.kill())]);
      for (const p of processes) history.info('fault', 'down', { target: p.name, roles: p.roles, fault: 'kill -9' });
      const cutAt = Date.now();
      const { kept, dropped } = await disk.cut().catch(async (err: Error) => {
        const open = await disk.open().catch(() => []);
        ctx.log(`power cut: #${n}: the cut failed: ${err.message}; open now: ${open.join(', ') || 'nothing'}`);
        throw err;
      });
      ctx.log(`power cut: #${n}: the disks kept what was synced (${kept} files and folders) and dropped ${dropped} never synced (rebuilt in ${((Date.now() - cutAt) / 1000).toFixed(1)} s); dark for ${darkMs} ms`);
      await sleep(darkMs);
      const back = await Promise.allSettled(nodes.map(({ node }) => node.relaunch(NATS_BACK_MS)));
      back.forEach((r, i) => {
        if (r.status === 'rejected') history.info('fault', 'restart failed', { target: nodes[i].name, attempt: 1, error: String((r.reason as Error).message) });
        else history.info('fault', 'healed', { target: nodes[i].name, fault: 'nats restart' });
      });
      await cluster.startInOrder(async (p) => {
        await restartProcess(history, p);
        history.info('fault', 'healed', { target: p.name, fault: 'kill -9' });
      });
      history.info('fault', 'power on', { target: 'every node', n });
      ctx.log(`power cut: #${n}: every node back in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    });
  }
}
