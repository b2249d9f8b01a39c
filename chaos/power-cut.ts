import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LossyFs } from '../test/helpers/lossy-fs.js';
import type { FaultContext } from './faults.js';
import { restartProcess } from './faults.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How long a NATS node may take to accept connections again after a cut (every node recovers its store at once). */
const NATS_BACK_MS = 60_000;

/**
 * The power-cut disks of `npm run chaos -- --power-cuts`: lossyfs mounts (powercut/README.md) that
 * lose, at a cut, every write not followed by an fsync of its file. Pier's disk holds every Pier
 * process's data dir and the upload root, and loses every name whose folder was not fsynced (the
 * rule POSIX gives, which Pier keeps). The NATS disk holds the nodes' JetStream stores and keeps
 * names as a journaling filesystem does (`journal`: a full fsync commits every name change before
 * it): nats-server never fsyncs a folder it makes, so under the strict rule a cut loses every stream
 * made since the last cut whole (docs/operations.md "Power cuts"). Configuration and logs are on
 * neither (a real machine keeps them on a disk synced long ago).
 */
export class PowerCutDisks {
  private constructor(
    private readonly pier: LossyFs,
    private readonly nats: LossyFs,
  ) {}

  /** Mounts both under `dir`; throws with the reason where FUSE cannot run. */
  static async mount(dir: string): Promise<PowerCutDisks> {
    const why = LossyFs.unavailable();
    if (why) throw new Error(`--power-cuts needs the power-cut disk (powercut/README.md), which cannot run here: ${why}`);
    const one = async (name: string, journal: boolean) => {
      mkdirSync(join(dir, `${name}-backing`), { recursive: true });
      mkdirSync(join(dir, name), { recursive: true });
      return LossyFs.mount(join(dir, `${name}-backing`), join(dir, name), { journal });
    };
    const pier = await one('pier-disk', false);
    try {
      return new PowerCutDisks(pier, await one('nats-disk', true));
    } catch (err) {
      await pier.unmount();
      throw err;
    }
  }

  /** Where Pier's data dirs and upload root go. */
  get pierRoot(): string {
    return this.pier.mountDir;
  }

  /** Where the NATS nodes' stores go. */
  get natsRoot(): string {
    return this.nats.mountDir;
  }

  /**
   * Both disks lose what was not synced; what each kept and dropped (files and folders). A disk
   * waits up to 20 s for files still open to be closed (a killed process's files are released by
   * the kernel a moment after its death); if one is open after that, its cut is refused, naming it.
   * Rebuilding copies every file kept (the uploads are hundreds of MB after ten minutes): up to 3 min.
   */
  async cut(): Promise<{ kept: number; dropped: number }> {
    const [a, b] = await Promise.all([this.pier.cut({ waitForCloseMs: 20_000, rebuildMs: 180_000 }), this.nats.cut({ waitForCloseMs: 20_000, rebuildMs: 180_000 })]);
    return { kept: a.kept + b.kept, dropped: a.dropped + b.dropped };
  }

  /** What is open on either disk now (for the reason of a refused cut). */
  async open(): Promise<string[]> {
    const [a, b] = await Promise.all([this.pier.status(), this.nats.status()]);
    return [...a.open, ...b.open];
  }

  async unmount(): Promise<void> {
    await Promise.all([this.pier.unmount(), this.nats.unmount()]);
  }
}

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
