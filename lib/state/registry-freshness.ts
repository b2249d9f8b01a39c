import type { Bus } from '../../bus/bus.js';
import type { Logger } from '../runtime/log.js';

/**
 * How long a cache may know it is behind the registry and still answer: a lost change event is
 * noticed at the next registry heartbeat (every 500 ms by default), so a revocation holds within
 * that plus this, inside the promised second.
 */
const BEHIND_MS = 250;

/** What ./registry-cache.ts RegistryCacheOptions says of freshness. */
export interface FreshnessOptions {
  /** Past this long without hearing the registry, lookups answer 503 instead of trusting old data. */
  maxStalenessMs: number;
  log: Logger;
}

/**
 * Whether a registry cache (./registry-cache.ts) may answer: it heard the registry lately, it is not
 * known to be behind it for longer than BEHIND_MS, and no bus connection was lost since it last knew
 * it had every change. Told what the cache hears; the revision it holds is the cache's.
 */
export class RegistryFreshness {
  private lastHeard = 0;
  /**
   * The newest revision the registry announced (heartbeats, change events), and since when this
   * cache has known it is behind it. Behind for longer than BEHIND_MS (a lost change event, and
   * the snapshot that would repair it stuck on a paused replica), the cache answers 503 rather
   * than go on trusting what may have been revoked: a revocation holds within one second.
   */
  private announced = -1;
  private behindSince: number | null = null;
  /**
   * The bus's connection losses (Bus.connectionLosses) as of the last time this cache knew it had
   * every change: a change event published while the connection was down never arrives, so after a
   * loss the cache answers 503 until a load, or a registry heartbeat naming no revision it lacks,
   * heard after the loss says it is whole again (a revocation a NATS node's crash kept from it was
   * otherwise trusted until another change or a heartbeat said so).
   */
  private wholeAfterLosses = 0;
  /** The last heartbeat count heard from each registry replica (at most 64 replicas remembered). */
  private readonly beats = new Map<string, number>();
  /** What the last freshness check found (null: nothing loaded yet, nothing to report). */
  private wasFresh: boolean | null = null;

  constructor(
    private readonly bus: Pick<Bus, 'connectionLosses'>,
    private readonly options: FreshnessOptions,
    private readonly now: () => number,
  ) {}

  /** The registry was heard (news of it, not an old message played back). */
  heard(): void {
    this.lastHeard = this.now();
  }

  /** The cache holds every change as of `losses` connection losses. */
  wholeAt(losses: number): void {
    this.wholeAfterLosses = losses;
  }

  /** The cache holds every change as of `losses` connection losses, or of more already. */
  wholeAtLeast(losses: number): void {
    this.wholeAfterLosses = Math.max(this.wholeAfterLosses, losses);
  }

  /** A revision the registry has reached: a cache at `held` is behind until it has it too. */
  heardOf(revision: number, held: number): void {
    if (revision > this.announced) this.announced = revision;
    if (this.announced > held) this.behindSince ??= this.now();
  }

  /** After a load or an applied change: at `held`, caught up with what was announced, or still behind. */
  caughtUp(held: number): void {
    if (held >= this.announced) this.behindSince = null;
  }

  /** Whether the registry announced a revision past `held`. */
  announcedPast(held: number): boolean {
    return this.announced > held;
  }

  /** Whether the cache knows it is behind the registry. */
  get behind(): boolean {
    return this.behindSince !== null;
  }

  /** Whether a heartbeat is newer than any heard from its replica (bounded: the oldest replicas are forgotten first). */
  newBeat(instance: string, seq: number): boolean {
    const last = this.beats.get(instance);
    if (last !== undefined && seq <= last) return false;
    this.beats.delete(instance);
    if (this.beats.size >= 64) this.beats.delete(this.beats.keys().next().value!);
    this.beats.set(instance, seq);
    return true;
  }

  /** Whether a cache holding revision `held` (-1: nothing loaded) may answer. */
  isFresh(held: number): boolean {
    if (this.bus.connectionLosses() !== this.wholeAfterLosses) return false;
    if (this.behindSince !== null && this.now() - this.behindSince > BEHIND_MS) return false;
    return held >= 0 && this.now() - this.lastHeard <= this.options.maxStalenessMs;
  }

  /**
   * Logs the registry going stale and coming back, once each: an operator sees why requests
   * answered 503 in between, and when they stopped.
   */
  check(held: number): void {
    if (held < 0) return;
    const fresh = this.isFresh(held);
    if (fresh === this.wasFresh) return;
    if (!fresh) this.options.log.warn({ silentForMs: this.now() - this.lastHeard, revision: held }, 'registry not heard: requests that need it answer 503 until it is');
    else if (this.wasFresh === false) this.options.log.info({ revision: held }, 'registry heard again');
    this.wasFresh = fresh;
  }
}
