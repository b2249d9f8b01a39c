import { at, subjectPattern, type AnyLocated, type Exchange, type Located } from '../../bus/exchange.js';
import { hear, serve } from '../../bus/verbs.js';
import type { Subscription } from '../../bus/bus.js';
import { isFault, type PierError } from '../../bus/errors.js';
import type { BusRole, Declaration, JetStreamDeclaration } from '../../bus/permissions.js';
import type { Change, EndpointStats } from '../../bus/subjects.js';
import type { RoleContext, Running } from './runtime.js';

/**
 * An actor is a declaration: what it serves and hears on the bus (its two tables of entries), what
 * it calls and emits, its timers and how it starts and stops. `startActor` wires any declaration the
 * same way (subscribes, checks schemas, answers errors, counts, drains on stop), and
 * `busDeclarationOf` turns the same object into the role's permissions (cli/roles.ts): what a role
 * may do on the bus is written once.
 *
 * An entry's exchange is declared in `bus/subjects-*.ts`, on its subject, or on one this process
 * builds from its bus id, `at(exchange, subjectOf)` (one replica's own: the events of the
 * connections it delivers). A request/reply exchange is served, a one-way one heard: an entry in the
 * other table is a type error, and refused at start.
 *
 * `S` is the actor's state, built by `onStart` from the role's context (its stores, its policies);
 * every handler gets it first.
 */
export interface ActorDeclaration<S> {
  readonly role: BusRole;
  /** Request/reply entries, each with its handler (or served by the actor's own code: `opens`). */
  readonly serves: Readonly<Record<string, Served<S>>>;
  /** One-way entries: events every replica hears, or what is told to this replica's own subject. */
  readonly hears?: Readonly<Record<string, Heard<S>>>;
  /** Exchanges it asks, and one-way ones it tells: on their subjects, or `at(exchange, subjectOf)` for any process's. */
  readonly calls?: ReadonlyArray<AnyLocated>;
  readonly emits?: ReadonlyArray<AnyLocated>;
  /** JetStream state it owns (PIER_STATE=jetstream), in the role's own account. */
  readonly jetstream?: JetStreamDeclaration;
  /** Periodic work; a run that throws is logged, and the next one still comes. */
  readonly timers?: Readonly<Record<string, ActorTimer<S>>>;
  /** Registry changes this replica applied (uninstalls, reinstalls), in order. */
  readonly onRegistryChange?: (state: S, change: Change) => void;
  readonly onStart: (ctx: RoleContext) => Promise<S>;
  /** After the subscriptions are drained and timers stopped: release what `onStart` opened. */
  readonly onStop?: (state: S) => Promise<void>;
}

export interface Served<S> {
  readonly exchange: AnyLocated;
  /** Undefined: the actor's own code serves it, on subjects it opens at run time (`opens`). */
  readonly handle: ((state: S, req: never) => unknown) | undefined;
}

export interface Heard<S> {
  readonly exchange: Located<unknown, never>;
  readonly handle: (state: S, value: never) => void;
}

export interface ActorTimer<S> {
  readonly everyMs: (ctx: RoleContext) => number;
  /** Once, `everyMs` after the start, rather than every `everyMs`. */
  readonly once?: boolean;
  readonly run: (state: S) => Promise<unknown> | unknown;
}

/**
 * Typed entries: the handler's request is the exchange's (the tables above erase it). The answer's
 * type comes from the exchange alone, so a one-way exchange (whose answer is `never`) cannot be served.
 */
export function serves<S, Req, Res>(exchange: Located<Req, Res>, handle: (state: S, req: Req) => NoInfer<Res> | Promise<NoInfer<Res>>): Served<S> {
  return { exchange, handle } as unknown as Served<S>;
}

export function hears<S, T>(exchange: Located<T, never>, handle: (state: S, value: T) => void): Heard<S> {
  return { exchange, handle } as unknown as Heard<S>;
}

/**
 * A request/reply exchange the actor's own code serves on subjects it opens at run time, one per
 * piece of work (a PATCH's write session, a byte stream), for as long as that work lasts: named on
 * the pattern those subjects match (a wildcard, or built from this replica's bus id). Not an entry
 * the starter subscribes for the actor's life: each such subject exists only while its work holds it
 * (a piece sent after that meets nobody, at once, rather than another's work), and keeps its own
 * order. Declared here so that the role's rights still come from this table alone.
 */
export function opens<S>(exchange: AnyLocated): Served<S> {
  return { exchange, handle: undefined };
}

export const defineActor = <S>(d: ActorDeclaration<S>): ActorDeclaration<S> => d;

/** Any actor, whatever its state (its state appears both in and out, so no narrower type holds them all). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyActor = ActorDeclaration<any>;

/** A one-way exchange is heard, never served; a request/reply one served, never heard (the types say so too). */
function checkTables(d: AnyActor): void {
  for (const [name, e] of Object.entries(d.serves)) {
    if (e.exchange.oneWay) throw new TypeError(`actor ${d.role}: serves.${name} is a one-way exchange: it belongs in hears`);
  }
  for (const [name, e] of Object.entries(d.hears ?? {})) {
    if (!e.exchange.oneWay) throw new TypeError(`actor ${d.role}: hears.${name} is a request/reply exchange: it belongs in serves`);
  }
}

/**
 * The role's bus surface, for its permissions: every subject above, one built from a bus id as a
 * pattern over bus ids, each once (a stream's take and its pieces share their subjects' pattern).
 */
export function busDeclarationOf(d: AnyActor): Declaration {
  checkTables(d);
  const subjects = (xs: readonly AnyLocated[]) => [...new Set(xs.map(subjectPattern))];
  return {
    serves: subjects(Object.values(d.serves).map((e) => e.exchange)),
    hears: subjects(Object.values(d.hears ?? {}).map((e) => e.exchange)),
    calls: subjects(d.calls ?? []),
    emits: subjects(d.emits ?? []),
    ...(d.jetstream ? { jetstream: d.jetstream } : {}),
  };
}

export interface RunningActor extends Running {
  readonly role: BusRole;
  stats(): Record<string, EndpointStats>;
}

/** How long a stopping actor waits for the requests it is handling before it closes its state anyway. */
const DRAIN_MS = 5_000;

/**
 * Starts an actor from its declaration. Each served entry's handler runs behind `serve` (the request
 * checked against its schema, a throw answered at once as its typed error) and is counted; each heard
 * one is guarded (a throw logged and counted, never thrown into the bus); on stop
 * the subscriptions go first, then the requests in flight are waited for (bounded), then the state closes.
 */
export async function startActor<S>(d: ActorDeclaration<S>, ctx: RoleContext): Promise<RunningActor> {
  checkTables(d);
  const state = await d.onStart(ctx);
  const stats: Record<string, EndpointStats> = {};
  // Requests being handled, counted (a stop waits for them): a number and one shared callback,
  // nothing made per request but the one promise that tells their end.
  let handling = 0;
  let idle: (() => void) | null = null;
  const ended = () => {
    if (--handling === 0) idle?.();
  };
  const track = (p: Promise<unknown>): Promise<unknown> => {
    handling++;
    p.then(ended, ended);
    return p;
  };
  const observe = (name: string) => (subject: string, seconds: number, error: PierError | undefined) => {
    const s = stats[name];
    s.requests++;
    s.processingMs += seconds * 1000;
    s.averageMs = s.processingMs / s.requests;
    if (error) {
      const last = { code: error.code, message: error.message, at: new Date(ctx.now()).toISOString() };
      s.errors++;
      s.lastError = last;
      if (isFault(error.code)) {
        s.faults = (s.faults ?? 0) + 1;
        s.lastFault = last;
      }
    }
    ctx.metrics.observeActor(subject, seconds, error);
  };
  const subs: Subscription[] = [];
  const own = <Req, Res>(ex: Located<Req, Res>): Exchange<Req, Res> => (ex.subject !== undefined ? ex : at(ex, ex.subjectOf(ctx.peers.self.busId)));
  try {
    for (const [name, e] of Object.entries(d.serves)) {
      if (!e.handle) continue; // opened by the actor's own code (`opens`)
      const handle = e.handle as (state: S, req: unknown) => unknown;
      // `serve` calls this inside its own try: a synchronous throw is answered as a rejection would be.
      const run = (req: unknown) => {
        let p: Promise<unknown>;
        try {
          p = Promise.resolve(handle(state, req));
        } catch (err) {
          p = Promise.reject(err);
        }
        return track(p);
      };
      // Counted per entry, on its declared subject. One on this replica's own subject is served
      // uncounted, as it always was: its subject names the replica, and reports keep their series.
      if (e.exchange.subject === undefined) {
        subs.push(serve(ctx.bus, own(e.exchange), run));
        continue;
      }
      stats[name] = { subject: e.exchange.subject, requests: 0, errors: 0, processingMs: 0, averageMs: 0, lastError: null, faults: 0, lastFault: null };
      subs.push(serve(ctx.bus, e.exchange, run, { observe: observe(name) }));
    }
    for (const [name, h] of Object.entries(d.hears ?? {})) {
      const handle = h.handle as (state: S, value: unknown) => void;
      // The failure counter's label, as it always was: an event's, or a signal's (this replica's own subject).
      const where = `${d.role} ${h.exchange.subject === undefined ? 'signal' : 'event'} ${name}`;
      subs.push(hear(ctx.bus, own(h.exchange), (value) => guarded(ctx, where, () => handle(state, value))));
    }
  } catch (err) {
    for (const s of subs) s.unsubscribe();
    await d.onStop?.(state);
    throw err;
  }
  const stopWatch = d.onRegistryChange ? ctx.cache.onApplied((change) => guarded(ctx, `${d.role} registry change`, () => d.onRegistryChange!(state, change))) : () => undefined;
  const timers = Object.entries(d.timers ?? {}).map(([name, t]) => startTimer(ctx, `${d.role} timer ${name}`, t, state));

  return {
    role: d.role,
    stats: () => structuredClone(stats),
    async stop() {
      // Queue group membership ends first; what NATS already routed here is still handled (a plain
      // unsubscribe drops it, and its asker waits out its deadline: found by npm run upgrade).
      const unsubscribed = Promise.allSettled(subs.map((s) => (s.drain ? s.drain() : s.unsubscribe())));
      await Promise.race([unsubscribed, new Promise((r) => setTimeout(r, DRAIN_MS).unref())]);
      stopWatch();
      for (const stopTimer of timers) stopTimer();
      const drained = handling === 0 ? Promise.resolve() : new Promise<void>((r) => (idle = r));
      await Promise.race([drained, new Promise((r) => setTimeout(r, DRAIN_MS).unref())]);
      await d.onStop?.(state);
    },
  };
}

/** A handler's bug is logged and counted, never thrown into the bus or the cache that called it. */
function guarded(ctx: RoleContext, where: string, run: () => unknown): void {
  try {
    const out = run();
    if (out instanceof Promise) out.catch((err: unknown) => failed(ctx, where, err));
  } catch (err) {
    failed(ctx, where, err);
  }
}

function failed(ctx: RoleContext, where: string, err: unknown): void {
  ctx.metrics.handlerFailures.inc({ where });
  ctx.log.error({ err }, `${where} failed`);
}

/** A timer whose runs never overlap: a run still going when the next is due skips that one. */
function startTimer<S>(ctx: RoleContext, where: string, t: ActorTimer<S>, state: S): () => void {
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    void Promise.resolve()
      .then(() => t.run(state))
      .catch((err: unknown) => failed(ctx, where, err))
      .finally(() => (running = false));
  };
  const ms = t.everyMs(ctx);
  const handle = t.once ? setTimeout(tick, ms) : setInterval(tick, ms);
  return () => clearTimeout(handle);
}
