import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LossyFs, type CutResult } from './lossy-fs.js';
import { patience } from './time.js';

/**
 * The power-cut disks of `npm run chaos -- --power-cuts` and test/e2e/power-cut-cluster.test.ts: lossyfs mounts (powercut/README.md) that
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
   * Both disks lose what was not synced; what they kept and dropped (files and folders), each and in all. A disk
   * waits up to 20 s for files still open to be closed (a killed process's files are released by
   * the kernel a moment after its death); if one is open after that, its cut is refused, naming it.
   * Rebuilding copies every file kept (the uploads are hundreds of MB after ten minutes): up to 3 min.
   */
  async cut(): Promise<{ kept: number; dropped: number; pier: CutResult; nats: CutResult }> {
    const [pier, nats] = await Promise.all([this.pier.cut({ waitForCloseMs: patience(20_000), rebuildMs: 180_000 }), this.nats.cut({ waitForCloseMs: patience(20_000), rebuildMs: 180_000 })]);
    return { kept: pier.kept + nats.kept, dropped: pier.dropped + nats.dropped, pier, nats };
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
