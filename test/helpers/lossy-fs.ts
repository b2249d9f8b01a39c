import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { patience } from './time.js';
import { until, within } from './wait.js';

/**
 * A mount that loses what was not synced when the power is cut (powercut/README.md): a FUSE
 * passthrough (powercut/lossyfs.py, Debian's python3-pyfuse3) over a backing folder. Reads see
 * everything; `cut()` drops every write not fsync'd and every name change whose folder was not
 * fsync'd, as a power cut of the whole machine would. Stop every process using the mount before a
 * cut: it is refused while a file is open.
 */
const DAEMON = fileURLToPath(new URL('../../../powercut/lossyfs.py', import.meta.url));
// Debian's interpreter, where Debian's pyfuse3 is: the python3 first on a PATH may be another one.
const PYTHON = '/usr/bin/python3';

export type CutResult = { kept: number; dropped: number };
export type LossyStatus = { open: string[]; dirtyFiles: number; pendingRenames: number; inodes: number };

/** Whether `dir` is a lossyfs mount now (/proc/self/mountinfo: field 5 the mount point). */
function mounted(dir: string): boolean {
  const lines = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  return lines.some((l) => l.split(' ')[4] === dir && / - fuse\.lossyfs /.test(l));
}

export class LossyFs {
  private stderr = '';
  private readonly exited: Promise<number | null>;

  private constructor(
    private readonly proc: ChildProcess,
    readonly backingDir: string,
    readonly mountDir: string,
    private readonly stateDir: string,
  ) {
    this.exited = new Promise((resolve) => proc.once('close', (code) => resolve(code))); // after its stderr: the reason it gives
    proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  /** Why the layer cannot run on this machine (FUSE needs root and /dev/fuse), or undefined. */
  static unavailable(): string | undefined {
    if (process.getuid?.() !== 0) return 'not root (mounting FUSE needs root here)';
    if (!existsSync('/dev/fuse')) return 'no /dev/fuse on this machine';
    return undefined;
  }

  static available(): boolean {
    return LossyFs.unavailable() === undefined;
  }

  /**
   * `run` (a test function: `test`, `test.serial`) where the layer can run, `skip` otherwise, having
   * said once why (`file`: the test file that asks).
   */
  static testsHere<F>(file: string, run: F, skip: F): F {
    const why = LossyFs.unavailable();
    if (why) console.log(`${file}: skipped, the power-cut layer cannot run here: ${why}`);
    return why ? skip : run;
  }

  /**
   * Mounts `backingDir` (its content as it is counts as durable) at `mountDir`. `journal`: names as
   * a journaling filesystem (ext4, XFS) keeps them, a full fsync of any file or folder committing
   * every name change made before it (powercut/README.md); by default only a folder's fsync does.
   */
  static async mount(backingDir: string, mountDir: string, options: { trace?: boolean; journal?: boolean } = {}): Promise<LossyFs> {
    const why = LossyFs.unavailable();
    if (why) throw new Error(`lossyfs: cannot mount: ${why}`);
    const [backing, mount] = [realpathSync(backingDir), realpathSync(mountDir)];
    const state = mkdtempSync(join(tmpdir(), 'lossyfs-'));
    const args = ['-B', DAEMON, backing, mount, '--state', state, ...(options.trace ? ['--trace'] : []), ...(options.journal ? ['--journal'] : [])];
    const proc = spawn(PYTHON, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const fs = new LossyFs(proc, backing, mount, state);
    let ready = false;
    proc.stdout!.on('data', (d: Buffer) => (ready ||= d.toString().includes('ready')));
    const early = fs.exited.then((code) => {
      const last = fs.stderr.trim().split('\n').pop() ?? '';
      throw new Error(last.startsWith('lossyfs: ') ? last : `lossyfs exited (code ${code}) before mounting ${mount}: ${last}`);
    });
    try {
      await Promise.race([until(`lossyfs to mount ${mount} and answer on its control socket`, () => ready && mounted(mount), 10_000), early]);
    } catch (err) {
      await fs.unmount();
      throw err;
    }
    early.catch(() => {}); // a later exit is unmount's business
    return fs;
  }

  /**
   * The power cut: every unsynced write and name change is dropped, the mount shows the last
   * durable state. Waits up to `waitForCloseMs` for files still open to be closed (a killed
   * process's files are released by the kernel shortly after its death), then refuses, naming them.
   * `rebuildMs`: how long the rebuild of the backing from the durable copies may take after that (it
   * copies every file: a chaos run's hundreds of MB of uploads on a busy disk take tens of seconds).
   */
  async cut(options: { waitForCloseMs?: number; rebuildMs?: number } = {}): Promise<CutResult> {
    const wait = options.waitForCloseMs ?? patience(5_000);
    return (await this.command(`cut ${wait}`, wait + (options.rebuildMs ?? patience(10_000)))) as CutResult;
  }

  async status(): Promise<LossyStatus> {
    return (await this.command('status', 10_000)) as LossyStatus;
  }

  /** A clean shutdown: unmounts (the live tree stays in the backing folder) and removes the durable copies. */
  async unmount(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      try {
        await within(`lossyfs to unmount ${this.mountDir} and exit`, this.exited, 10_000);
      } catch {
        this.proc.kill('SIGKILL');
        await this.exited;
      }
    }
    // A daemon that died leaves a dead mount ("Transport endpoint is not connected"): detach it.
    if (mounted(this.mountDir)) spawnSync('umount', ['-l', this.mountDir]);
    rmSync(this.stateDir, { recursive: true, force: true });
  }

  /** Daemon's error output so far (its trace with `trace: true`). */
  get log(): string {
    return this.stderr;
  }

  private command(line: string, idleMs: number): Promise<unknown> {
    const answer = new Promise<string>((resolve, reject) => {
      const sock = connect(join(this.stateDir, 'control.sock'));
      let text = '';
      sock.on('connect', () => sock.write(`${line}\n`));
      sock.on('data', (d) => (text += d.toString()));
      sock.on('end', () => resolve(text.trim()));
      sock.on('error', (err) => reject(new Error(`lossyfs control socket: ${err.message}`)));
    });
    return within(`lossyfs to answer "${line}"`, answer, idleMs).then((reply) => {
      if (reply.startsWith('ok ')) return JSON.parse(reply.slice(3));
      throw new Error(`lossyfs: ${reply.replace(/^error /, '') || 'no answer'}`);
    });
  }
}
