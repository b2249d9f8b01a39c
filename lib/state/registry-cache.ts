import { ask, hear } from '../../bus/verbs.js';
import type { Bus, Subscription } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { registry, registryEvents, type AppView, type Change, type ChangeEvent, type ProviderView, type Snapshot } from '../../bus/subjects.js';
import type { Logger } from '../runtime/log.js';
import type { Metrics } from '../runtime/metrics.js';
import { TokenDigests } from '../crypto/token-digests.js';
import { RegistryFreshness } from './registry-freshness.js';
import { RegistryView } from './registry-view.js';

export interface RegistryCacheOptions {
  /** Past this long without hearing the registry, lookups answer 503 instead of trusting old data. */
  maxStalenessMs: number;
  log: Logger;
  metrics: Metrics;
  now?: () => number;
  /**
   * How long a snapshot question waits for a replica before it is asked again (1 s unless given;
   * unit tests give less, so as not to wait a silent replica's second out).
   */
  snapshotTimeoutMs?: number;
}

/**
 * How long a heartbeat naming a newer revision waits for that revision's change event before a
 * snapshot is asked: another replica's beat often comes a moment before the writer's event, and a
 * snapshot asked by every cache at once for each such write loaded the registry (a rolling upgrade
 * saw them take 0.2-1.2 s). Well inside BEHIND_MS (./registry-freshness.ts), so a lost event is
 * still asked for in time.
 */
const EVENT_WAIT_MS = 100;

/**
 * A read cache of the registry, fed by its change events, so that the edge and the actors check
 * tokens and look up apps without a bus round trip. Consistency rules:
 * - events are applied strictly in revision order; a gap triggers a snapshot reload, and events
 *   arriving meanwhile are buffered and replayed on top of it;
 * - the registry's heartbeat carries its revision, so a lost event is noticed within one beat
 *   (this is what bounds a token revocation to about one second on every edge);
 * - a cache that has not heard the registry for `maxStalenessMs` refuses to answer (503): it cannot
 *   know what was revoked meanwhile.
 * The records it holds are ./registry-view.ts; whether it may answer, ./registry-freshness.ts.
 */
export class RegistryCache {
  private revision = -1;
  /** The digests of the tokens asked about that are remembered (lib/crypto/token-digests.ts). */
  private readonly digests = new TokenDigests();
  private readonly view = new RegistryView(this.digests);
  private readonly freshness: RegistryFreshness;
  private subs: Subscription[] = [];
  private loading: Promise<void> | null = null;
  private buffered: ChangeEvent[] = [];
  private retryTimer: NodeJS.Timeout | null = null;
  private eventWait: NodeJS.Timeout | null = null;
  private freshnessTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly now: () => number;
  /** Listeners for applied changes (e.g. the gateway closing an uninstalled app's connections). */
  private readonly listeners = new Set<(change: Change) => void>();

  constructor(
    private readonly bus: Bus,
    private readonly options: RegistryCacheOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.freshness = new RegistryFreshness(bus, options, this.now);
  }

  /** Subscribes and starts loading; does not wait for the registry (see `ready()`). */
  start(): void {
    this.freshness.wholeAt(this.bus.connectionLosses());
    this.subs.push(
      hear(this.bus, registryEvents.changes, (ev) => this.onChange(ev)),
      hear(this.bus, registryEvents.heartbeat, (hb) => {
        // A copy of an earlier heartbeat (played back by whoever recorded it) says nothing of now.
        if (!this.freshness.newBeat(hb.instance, hb.seq)) return;
        const losses = this.bus.connectionLosses();
        this.freshness.heard();
        this.freshness.heardOf(hb.revision, this.revision);
        if (hb.revision > this.revision) this.reloadUnlessHeard();
        else if (this.revision >= 0) this.freshness.wholeAt(losses);
      }),
    );
    this.reload();
    const every = Math.min(5_000, Math.max(100, Math.floor(this.options.maxStalenessMs / 2)));
    this.freshnessTimer = setInterval(() => this.checkFreshness(), every);
    this.freshnessTimer.unref();
  }

  /**
   * Logs the registry going stale and coming back, once each: an operator sees why requests
   * answered 503 in between, and when they stopped (the timer calls it; tests may too).
   */
  checkFreshness(): void {
    this.freshness.check(this.revision);
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.eventWait) clearTimeout(this.eventWait);
    if (this.freshnessTimer) clearInterval(this.freshnessTimer);
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }

  /** Resolves once a snapshot has been loaded (retrying while the registry is unreachable). */
  async ready(): Promise<void> {
    while (this.revision < 0 && !this.stopped) {
      await (this.loading ?? new Promise((r) => setTimeout(r, 50)));
    }
  }

  isFresh(): boolean {
    return this.freshness.isFresh(this.revision);
  }

  currentRevision(): number {
    return this.revision;
  }

  onApplied(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  userExists(name: string): boolean {
    this.assertFresh();
    return this.view.userExists(name);
  }

  /** The user a token belongs to, or undefined when the token is unknown or revoked. */
  userForToken(token: string): string | undefined {
    this.assertFresh();
    return this.view.userForToken(token);
  }

  /**
   * Whether a token (by its SHA-256) is known to be revoked: false while nothing is loaded, so a
   * registry out of reach never closes anything. For sweeps over live connections.
   */
  tokenRevoked(digest: string): boolean {
    return this.revision >= 0 && !this.view.hasToken(digest);
  }

  app(user: string, name: string): AppView | undefined {
    this.assertFresh();
    return this.view.app(user, name);
  }

  appsOf(user: string): AppView[] {
    this.assertFresh();
    return this.view.appsOf(user);
  }

  appByKey(appKey: string): AppView | undefined {
    this.assertFresh();
    return this.view.appByKey(appKey);
  }

  /** The active provider of a user for (dataType, group, version), if any. */
  activeProvider(user: string, dataType: string, group: string, version: string): ProviderView | undefined {
    this.assertFresh();
    return this.view.activeProvider(user, dataType, group, version);
  }

  private assertFresh(): void {
    if (!this.isFresh()) throw new PierError('UNAVAILABLE', 'registry is not reachable; try again shortly');
  }

  private onChange(ev: ChangeEvent): void {
    // Only news counts as hearing the registry: an old change played back again does not.
    if (ev.revision > this.revision) this.freshness.heard();
    this.freshness.heardOf(ev.revision, this.revision);
    if (ev.revision <= this.revision) return;
    // The next revision is applied at once, a snapshot on its way or not: a heartbeat of the other
    // replica, or its later event, often arrives a moment before this one, and waiting for the
    // snapshot asked then (a busy replica, a busy event loop) kept the cache behind past BEHIND_MS,
    // answering 503 with nothing missing. Only a gap waits for a snapshot.
    if (this.revision >= 0 && ev.revision === this.revision + 1) {
      this.apply(ev);
      this.applyBuffered();
      return;
    }
    this.buffered.push(ev);
    this.reload();
  }

  /** Applies the buffered events that now follow on, in order; keeps those still past a gap. */
  private applyBuffered(): void {
    const pending = this.buffered.sort((a, b) => a.revision - b.revision);
    this.buffered = [];
    for (const ev of pending) {
      if (ev.revision === this.revision + 1) this.apply(ev);
      else if (ev.revision > this.revision) this.buffered.push(ev);
    }
  }

  /** A heartbeat named a revision this cache lacks: a snapshot, unless its change event comes first. */
  private reloadUnlessHeard(): void {
    if (this.revision < 0) return this.reload();
    if (this.eventWait || this.loading) return;
    this.eventWait = setTimeout(() => {
      this.eventWait = null;
      if (this.freshness.announcedPast(this.revision)) this.reload();
    }, EVENT_WAIT_MS);
  }

  private reload(): void {
    if (this.loading || this.stopped) return;
    // A replica that does not answer (paused, cut off) is given up on soon, and the question asked
    // again at once while behind: the queue group picks a replica afresh each time.
    const losses = this.bus.connectionLosses();
    this.loading = ask(this.bus, registry.snapshot, {}, { timeoutMs: this.options.snapshotTimeoutMs ?? 1_000 })
      .then((snap) => {
        // Events applied while it was on its way may have passed it: an older snapshot takes nothing back.
        if (snap.revision > this.revision) this.load(snap);
        else this.freshness.heard();
        // Asked after the last loss: the answer holds every change made before it (and this cache has them all).
        this.freshness.wholeAtLeast(losses);
        this.applyBuffered();
        // What is still past a gap waits for the next heartbeat or event to ask again.
        this.buffered = [];
      })
      .catch((err: unknown) => {
        this.options.log.warn({ err: (err as Error).message }, 'registry snapshot not loaded; retrying');
        if (!this.stopped) this.retryTimer = setTimeout(() => this.reload(), this.freshness.behind ? 50 : 500);
      })
      .finally(() => {
        this.loading = null;
      });
  }

  private load(snap: Snapshot): void {
    this.options.metrics.registryResyncs.inc();
    this.view.load(snap);
    this.revision = snap.revision;
    this.freshness.heard();
    this.options.metrics.registryRevision.set(this.revision);
    this.freshness.caughtUp(this.revision);
  }

  private apply(ev: ChangeEvent): void {
    this.view.apply(ev.changes);
    this.revision = ev.revision;
    this.options.metrics.registryRevision.set(this.revision);
    this.freshness.caughtUp(this.revision);
    for (const c of ev.changes) for (const l of this.listeners) l(c);
  }
}
