import { ask, hear } from '../../bus/verbs.js';
import type { Bus, Subscription } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { registry, registryEvents, type AppView, type Change, type ChangeEvent, type ProviderView, type Snapshot } from '../../bus/subjects.js';
import type { Logger } from '../runtime/log.js';
import type { Metrics } from '../runtime/metrics.js';
import { TokenDigests } from '../crypto/token-digests.js';
import { appId } from '../../bus/ids.js';

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
 * A read cache of the registry, fed by its change events, so that the edge and the actors check
 * tokens and look up apps without a bus round trip. Consistency rules:
 * - events are applied strictly in revision order; a gap triggers a snapshot reload, and events
 *   arriving meanwhile are buffered and replayed on top of it;
 * - the registry's heartbeat carries its revision, so a lost event is noticed within one beat
 *   (this is what bounds a token revocation to about one second on every edge);
 * - a cache that has not heard the registry for `maxStalenessMs` refuses to answer (503): it cannot
 *   know what was revoked meanwhile.
 */
/**
 * How long a cache may know it is behind the registry and still answer: a lost change event is
 * noticed at the next registry heartbeat (every 500 ms by default), so a revocation holds within
 * that plus this, inside the promised second.
 */
const BEHIND_MS = 250;
/**
 * How long a heartbeat naming a newer revision waits for that revision's change event before a
 * snapshot is asked: another replica's beat often comes a moment before the writer's event, and a
 * snapshot asked by every cache at once for each such write loaded the registry (a rolling upgrade
 * saw them take 0.2-1.2 s). Well inside BEHIND_MS, so a lost event is still asked for in time.
 */
const EVENT_WAIT_MS = 100;

export class RegistryCache {
  private revision = -1;
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
  private tokens = new Map<string, string>();
  /** The last heartbeat count heard from each registry replica (at most 64 replicas remembered). */
  private readonly beats = new Map<string, number>();
  private readonly digests = new TokenDigests();
  private users = new Set<string>();
  private apps = new Map<string, AppView>();
  private appsByKey = new Map<string, AppView>();
  private providers = new Map<string, ProviderView>();
  /** Active providers by `user, dataType, group, version`: the provider-call hot path. */
  private activeByTarget = new Map<string, ProviderView>();
  private subs: Subscription[] = [];
  private loading: Promise<void> | null = null;
  private buffered: ChangeEvent[] = [];
  private retryTimer: NodeJS.Timeout | null = null;
  private eventWait: NodeJS.Timeout | null = null;
  private freshnessTimer: NodeJS.Timeout | null = null;
  /** What the last freshness check found (null: nothing loaded yet, nothing to report). */
  private wasFresh: boolean | null = null;
  private stopped = false;
  private readonly now: () => number;
  /** Listeners for applied changes (e.g. the gateway closing an uninstalled app's connections). */
  private readonly listeners = new Set<(change: Change) => void>();

  constructor(
    private readonly bus: Bus,
    private readonly options: RegistryCacheOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Subscribes and starts loading; does not wait for the registry (see `ready()`). */
  start(): void {
    this.wholeAfterLosses = this.bus.connectionLosses();
    this.subs.push(
      hear(this.bus, registryEvents.changes, (ev) => this.onChange(ev)),
      hear(this.bus, registryEvents.heartbeat, (hb) => {
        // A copy of an earlier heartbeat (played back by whoever recorded it) says nothing of now.
        if (!this.newBeat(hb.instance, hb.seq)) return;
        const losses = this.bus.connectionLosses();
        this.lastHeard = this.now();
        this.heardOf(hb.revision);
        if (hb.revision > this.revision) this.reloadUnlessHeard();
        else if (this.revision >= 0) this.wholeAfterLosses = losses;
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
    if (this.revision < 0) return;
    const fresh = this.isFresh();
    if (fresh === this.wasFresh) return;
    if (!fresh) this.options.log.warn({ silentForMs: this.now() - this.lastHeard, revision: this.revision }, 'registry not heard: requests that need it answer 503 until it is');
    else if (this.wasFresh === false) this.options.log.info({ revision: this.revision }, 'registry heard again');
    this.wasFresh = fresh;
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
    if (this.bus.connectionLosses() !== this.wholeAfterLosses) return false;
    if (this.behindSince !== null && this.now() - this.behindSince > BEHIND_MS) return false;
    return this.revision >= 0 && this.now() - this.lastHeard <= this.options.maxStalenessMs;
  }

  /** A revision the registry has reached: this cache is behind until it has it too. */
  private heardOf(revision: number): void {
    if (revision > this.announced) this.announced = revision;
    if (this.announced > this.revision) this.behindSince ??= this.now();
  }

  /** After a load or an applied change: caught up with what was announced, or still behind. */
  private caughtUp(): void {
    if (this.revision >= this.announced) this.behindSince = null;
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
    return this.users.has(name);
  }

  /** The user a token belongs to, or undefined when the token is unknown or revoked. */
  userForToken(token: string): string | undefined {
    this.assertFresh();
    const user = this.tokens.get(this.digests.of(token, (digest) => this.tokens.has(digest)));
    return user !== undefined && this.users.has(user) ? user : undefined;
  }

  /**
   * Whether a token (by its SHA-256) is known to be revoked: false while nothing is loaded, so a
   * registry out of reach never closes anything. For sweeps over live connections.
   */
  tokenRevoked(digest: string): boolean {
    return this.revision >= 0 && !this.tokens.has(digest);
  }

  app(user: string, name: string): AppView | undefined {
    this.assertFresh();
    return this.apps.get(appId(user, name));
  }

  appsOf(user: string): AppView[] {
    this.assertFresh();
    return [...this.apps.values()].filter((a) => a.user === user);
  }

  appByKey(appKey: string): AppView | undefined {
    this.assertFresh();
    return this.appsByKey.get(appKey);
  }

  /** The active provider of a user for (dataType, group, version), if any. */
  activeProvider(user: string, dataType: string, group: string, version: string): ProviderView | undefined {
    this.assertFresh();
    return this.activeByTarget.get(`${user}\0${dataType}\0${group}\0${version}`);
  }

  /** Whether a heartbeat is newer than any heard from its replica (bounded: the oldest replicas are forgotten first). */
  private newBeat(instance: string, seq: number): boolean {
    const last = this.beats.get(instance);
    if (last !== undefined && seq <= last) return false;
    this.beats.delete(instance);
    if (this.beats.size >= 64) this.beats.delete(this.beats.keys().next().value!);
    this.beats.set(instance, seq);
    return true;
  }

  private indexProviders(): void {
    this.activeByTarget = new Map();
    for (const p of this.providers.values()) {
      if (p.state === 'active') this.activeByTarget.set(`${p.user}\0${p.dataType}\0${p.group}\0${p.version}`, p);
    }
  }

  private assertFresh(): void {
    if (!this.isFresh()) throw new PierError('UNAVAILABLE', 'registry is not reachable; try again shortly');
  }

  private onChange(ev: ChangeEvent): void {
    // Only news counts as hearing the registry: an old change played back again does not.
    if (ev.revision > this.revision) this.lastHeard = this.now();
    this.heardOf(ev.revision);
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
      if (this.announced > this.revision) this.reload();
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
        else this.lastHeard = this.now();
        // Asked after the last loss: the answer holds every change made before it (and this cache has them all).
        this.wholeAfterLosses = Math.max(this.wholeAfterLosses, losses);
        this.applyBuffered();
        // What is still past a gap waits for the next heartbeat or event to ask again.
        this.buffered = [];
      })
      .catch((err: unknown) => {
        this.options.log.warn({ err: (err as Error).message }, 'registry snapshot not loaded; retrying');
        if (!this.stopped) this.retryTimer = setTimeout(() => this.reload(), this.behindSince === null ? 500 : 50);
      })
      .finally(() => {
        this.loading = null;
      });
  }

  private load(snap: Snapshot): void {
    this.options.metrics.registryResyncs.inc();
    this.tokens = new Map(snap.tokens.map((t) => [t.digest, t.user]));
    this.digests.clear();
    this.users = new Set(snap.users.map((u) => u.name));
    this.apps = new Map(snap.apps.map((a) => [a.id, a]));
    this.appsByKey = new Map(snap.apps.map((a) => [a.appKey, a]));
    this.providers = new Map(snap.providers.map((p) => [p.name, p]));
    this.indexProviders();
    this.revision = snap.revision;
    this.lastHeard = this.now();
    this.options.metrics.registryRevision.set(this.revision);
    this.caughtUp();
  }

  private apply(ev: ChangeEvent): void {
    for (const c of ev.changes) {
      if (c.kind === 'user') this.users.add(c.value.name);
      else if (c.kind === 'token' && c.op === 'put') this.tokens.set(c.value.digest, c.value.user);
      else if (c.kind === 'token' && c.op === 'delete') {
        this.tokens.delete(c.key);
        this.digests.clear();
      }
      else if (c.kind === 'app' && c.op === 'put') {
        this.apps.set(c.value.id, c.value);
        this.appsByKey.set(c.value.appKey, c.value);
      } else if (c.kind === 'app' && c.op === 'delete') {
        const old = this.apps.get(c.key);
        this.apps.delete(c.key);
        if (old) this.appsByKey.delete(old.appKey);
      } else if (c.kind === 'provider' && c.op === 'put') this.providers.set(c.value.name, c.value);
      else if (c.kind === 'provider' && c.op === 'delete') this.providers.delete(c.key);
    }
    if (ev.changes.some((c) => c.kind === 'provider')) this.indexProviders();
    this.revision = ev.revision;
    this.options.metrics.registryRevision.set(this.revision);
    this.caughtUp();
    for (const c of ev.changes) for (const l of this.listeners) l(c);
  }
}
