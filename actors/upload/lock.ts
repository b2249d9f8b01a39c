import { randomBytes } from 'node:crypto';
import { ErrorReasons, PierError } from '../../bus/errors.js';
import type { Upload, UploadLock, UploadStore } from './store.js';

/**
 * The upload lock. The rule: **an upload is written by at most one write session at a time**, and
 * a lock never outlives its writer by more than one lease.
 *
 * - A session takes the lock in the same store transaction that checks the upload (its owner, its
 *   offset), so two PATCHes racing on any replicas cannot both get it; the loser hears 409 `upload busy`.
 * - The lock names its replica (bus id), its session and the end of its lease. It is *alive* while
 *   the lease runs and its writer does: on this replica, while the session is open here (a
 *   restarted replica has a new bus id, so its old locks are dead at once); on another, while that
 *   replica heartbeats (trusted alive for a grace after this one starts, before heartbeats came).
 * - The session renews the lease while bytes flow and releases it when it ends, whatever way
 *   (`Lease.end`, called from a `finally`). Every store write a session makes is fenced by its lock
 *   (`holds`): a session that lost it (`lockLost`) changes nothing, and no session cuts its part
 *   back (the next holder starts from the recorded offset). The record's `lock: null` is written
 *   with the offset; if that write fails, the lock is dead anyway: its session is no longer open here.
 * - Who waits for a lock to go (a re-POST, a GET, the next PATCH) is woken when it does: at once
 *   for this replica's sessions, by a `released` event for another's, at the lease's end or when its
 *   replica is known dead otherwise; never later than `settleWaitMs`. Nothing polls.
 */
export interface LockDeps {
  store: UploadStore;
  /** This replica's bus id. */
  busId: string;
  now: () => number;
  leaseMs: number;
  /** Whether another upload replica is alive (its heartbeats come). */
  replicaAlive: (busId: string) => boolean;
  /** Tells the other replicas that a lock of this one ended (they call `wake`). */
  announce: (id: string) => void;
  /** The longest a waiter waits (below the deadline of the bus request that waits). */
  settleWaitMs: number;
}

/** One session's hold on one upload's lock. */
export interface Lease {
  readonly session: string;
  readonly upload: Upload;
  /**
   * Pushes the lease's end forward (the session calls it while bytes flow); false when the lock is
   * no longer this session's (see `lockLost`).
   */
  renew(): Promise<boolean>;
  /** Whether a record (read inside a store write) still carries this session's lock: the fence of every write a session makes. */
  holds(u: Upload | undefined): boolean;
  /** The session is over: the lock is dead from now on, and whoever waits on it is woken. */
  end(): void;
}

export const uploadBusy = () => new PierError('CONFLICT', 'upload busy', { reason: ErrorReasons.UPLOAD_BUSY });
const isBusy = (err: unknown) => err instanceof PierError && err.is(ErrorReasons.UPLOAD_BUSY);

/**
 * A session silent past its lease (its replica paused, starved, or judged dead) may find its lock
 * taken by another PATCH that went further. It must then change nothing: not the offset (it would
 * take back bytes the other acknowledged), not the part (cutting back would drop them). Its client
 * asks for the offset and resumes, as after any 409.
 */
export const lockLost = () =>
  new PierError('CONFLICT', 'upload busy: this PATCH was silent past its lock and another PATCH took the upload over; ask for the offset and resume');

export class UploadLocks {
  /** This replica's open sessions: a lock it holds is alive exactly while its session is in here. */
  private readonly open = new Set<string>();
  /** Locks being taken here, by upload id: not yet committed, so not yet visible in the store. */
  private readonly taking = new Map<string, Promise<unknown>>();
  /** Who waits for a lock to go, by upload id (each for at most `settleWaitMs`: bounded by the requests in flight). */
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly deps: LockDeps) {}

  get leaseMs(): number {
    return this.deps.leaseMs;
  }

  alive(lock: UploadLock): boolean {
    if (lock.until <= this.deps.now()) return false;
    if (lock.owner === this.deps.busId) return this.open.has(lock.session);
    return this.deps.replicaAlive(lock.owner);
  }

  /**
   * Takes `id`'s lock for a new session, in one transaction with `admit` (which throws to refuse
   * with its error, or returns false to refuse quietly: null). 409 `upload busy` when a live lock holds it.
   * `touch`: the upload counts as used now (a PATCH), not for recovery's repairs.
   */
  async take(
    id: string,
    admit: (current: Upload | undefined) => current is Upload,
    /** `change`: what the taker changes in the record, in the same transaction (a tus PATCH declaring a deferred length). */
    options: { touch: boolean; session?: string; change?: (u: Upload) => Upload },
  ): Promise<Lease | null> {
    const session = options.session ?? newSession();
    this.open.add(session);
    const taken = this.deps.store.write((w) => {
      const current = w.get(id);
      if (!admit(current)) return null;
      if (current.lock && this.alive(current.lock)) throw uploadBusy();
      const now = this.deps.now();
      const locked: Upload = { ...(options.change ? options.change(current) : current), lock: { owner: this.deps.busId, session, until: now + this.deps.leaseMs }, ...(options.touch ? { updatedAt: now } : {}) };
      w.put(locked);
      return locked;
      // Visible is enough: the lock excludes other replicas once committed, and nothing is
      // acknowledged before the session's offset record, whose durable write takes this one along.
    }, { visibleOnly: true });
    this.taking.set(id, taken);
    try {
      const upload = await taken;
      if (!upload) this.open.delete(session);
      return upload ? this.lease(upload, session) : null;
    } catch (err) {
      this.open.delete(session);
      throw err;
    } finally {
      if (this.taking.get(id) === taken) this.taking.delete(id);
    }
  }

  /**
   * The upload once no live lock holds it, or `settleWaitMs` passed (then as it is); undefined if
   * absent. A lock being taken here and not yet committed is waited for too: it is about to hold.
   */
  async settled(id: string, deadline = Date.now() + this.deps.settleWaitMs, fresh = false): Promise<Upload | undefined> {
    // The first look is this replica's view (a caller has just read it); every later one reads
    // what other replicas wrote meanwhile (a release).
    let latest = fresh;
    for (;;) {
      await this.taking.get(id)?.catch(() => undefined);
      const u = latest ? await this.deps.store.read((r) => r.get(id)) : this.deps.store.get(id);
      latest = true;
      if (!u?.lock || !this.alive(u.lock) || Date.now() >= deadline) return u;
      // Woken by the lock's end, or at its lease's end or the deadline, whichever comes first.
      const leaseLeft = u.lock.until - this.deps.now();
      await this.wakeOrAfter(id, Math.max(1, Math.min(deadline - Date.now(), leaseLeft)));
    }
  }

  /**
   * `take`, once a lock that holds the upload now has settled: a PATCH (or a tus DELETE) waits for
   * the one in progress instead of hearing 409 at once. A lock taken by someone else between the
   * wait and this take (two begins in the same moment: a cut PATCH's late one and the client's
   * next) is waited for in turn; 409 `upload busy` only when one still holds it after `settleWaitMs`.
   */
  async takeWhenSettled(id: string, admit: (current: Upload | undefined) => current is Upload, options: { touch: boolean; change?: (u: Upload) => Upload }): Promise<Lease | null> {
    const deadline = Date.now() + this.deps.settleWaitMs;
    // After a refused take, the lock it met may be newer than this replica's view: read it fresh.
    for (let fresh = false; ; fresh = true) {
      await this.settled(id, deadline, fresh);
      try {
        return await this.take(id, admit, options);
      } catch (err) {
        if (!isBusy(err) || Date.now() >= deadline) throw err;
      }
    }
  }

  /** A lock of `id` may have gone (another replica's `released`). */
  wake(id: string): void {
    const ws = this.waiters.get(id);
    if (!ws) return;
    this.waiters.delete(id);
    for (const w of ws) w();
  }

  /** Every waiter looks again (a replica died: its locks are dead). */
  wakeAll(): void {
    for (const id of [...this.waiters.keys()]) this.wake(id);
  }

  private wakeOrAfter(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(id);
      if (!set) this.waiters.set(id, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        set!.delete(done);
        if (set!.size === 0 && this.waiters.get(id) === set) this.waiters.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  private lease(upload: Upload, session: string): Lease {
    let ended = false;
    return {
      session,
      upload,
      renew: async () => {
        if (ended) return false;
        const until = this.deps.now() + this.deps.leaseMs;
        return this.deps.store.write((w) => {
          const u = w.get(upload.id);
          if (u?.lock?.session !== session) return false;
          w.put({ ...u, lock: { ...u.lock, until } });
          return true;
        }, { visibleOnly: true });
      },
      holds: (u) => u?.lock?.session === session,
      end: () => {
        if (ended) return;
        ended = true;
        this.open.delete(session);
        this.wake(upload.id);
        this.deps.announce(upload.id);
      },
    };
  }
}

/** A session id: also a token of its write session's subject, so letters and digits only. */
const newSession = () => randomBytes(9).toString('base64url').replace(/[-_]/g, 'x');
