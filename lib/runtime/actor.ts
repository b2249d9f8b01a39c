import { at, type AnyLocated, type Exchange, type Located } from '../../bus/exchange.js';
import { checkTables, isOpened, type ActorDeclaration, type Opened } from './actor-declaration.js';
import { hear, serve } from '../../bus/verbs.js';
import type { Subscription } from '../../bus/bus.js';
import { isFault, type PierError } from '../../bus/errors.js';
import type { BusRole } from '../../bus/permissions.js';
import type { Change, EndpointStats } from '../../bus/subjects.js';
import type { RoleContext, Running } from './runtime.js';

/**
 * An actor is its declaration (actor-declaration.ts: what it does on the bus, its role's rights) and
 * its implementation: a handler per entry, its timers, how it starts and stops. `startActor` wires
 * any actor the same way (subscribes, checks schemas, answers errors, counts, drains on stop).
 */

type RequestOf<E> = E extends { readonly _req?: infer Req } ? Req : never;
type AnswerOf<E> = E extends { readonly _res?: infer Res } ? Res : never;

/** A handler per served entry (not those it opens), typed by its exchange: the answer's type comes from the exchange alone, so a one-way exchange (answer `never`) cannot be served. */
type ServeHandlers<D extends ActorDeclaration, S> = {
  readonly [K in keyof D['serves'] as D['serves'][K] extends Opened ? never : K]: (state: S, req: RequestOf<D['serves'][K]>) => NoInfer<AnswerOf<D['serves'][K]>> | Promise<NoInfer<AnswerOf<D['serves'][K]>>>;
};

/** A handler per heard entry: required when the declaration hears anything. */
type HearHandlers<D extends ActorDeclaration, S> = D extends { readonly hears: infer H }
  ? { readonly hears: { readonly [K in keyof H]: (state: S, value: RequestOf<H[K]>) => void } }
  : { readonly hears?: undefined };

/**
 * How an actor does what its declaration says: a handler for each entry, its timers, how it starts
 * and stops. `S` is the actor's state, built by `onStart` from the role's context (its stores, its
 * policies); every handler gets it first.
 */
export type ActorImplementation<D extends ActorDeclaration, S> = {
  readonly serves: ServeHandlers<D, S>;
  /** Periodic work; a run that throws is logged, and the next one still comes. */
  readonly timers?: Readonly<Record<string, ActorTimer<S>>>;
  /** Registry changes this replica applied (uninstalls, reinstalls), in order. */
  readonly onRegistryChange?: (state: S, change: Change) => void;
  readonly onStart: (ctx: RoleContext) => Promise<S>;
  /** After the subscriptions are drained and timers stopped: release what `onStart` opened. */
  readonly onStop?: (state: S) => Promise<void>;
} & HearHandlers<D, S>;

/** An actor as `startActor` runs it: its declaration, and each entry's exchange beside its handler. */
export interface Actor<S> {
  readonly declaration: ActorDeclaration;
  readonly role: BusRole;
  readonly serves: Readonly<Record<string, Served<S>>>;
  readonly hears: Readonly<Record<string, Heard<S>>>;
  readonly timers?: Readonly<Record<string, ActorTimer<S>>>;
  readonly onRegistryChange?: (state: S, change: Change) => void;
  readonly onStart: (ctx: RoleContext) => Promise<S>;
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
 * The actor of a declaration and its implementation: each entry's handler put beside its exchange.
 * A handler missing, or one for no entry, is refused here, when the implementation is loaded.
 */
export function defineActor<D extends ActorDeclaration, S>(declaration: D, implementation: ActorImplementation<D, S>): Actor<S> {
  const handlers = (kind: 'serves' | 'hears', declared: readonly string[], given: object | undefined) => {
    const missing = declared.filter((name) => !(given && name in given));
    const extra = Object.keys(given ?? {}).filter((name) => !declared.includes(name));
    if (missing.length > 0 || extra.length > 0) throw new TypeError(`actor ${declaration.role}: ${kind} handlers ${[...missing.map((n) => `missing for ${n}`), ...extra.map((n) => `given for ${n}, which is not declared`)].join(', ')}`);
    return (given ?? {}) as Record<string, never>;
  };
  const served = Object.entries(declaration.serves);
  const serveHandlers = handlers('serves', served.filter(([, e]) => !isOpened(e)).map(([name]) => name), implementation.serves);
  const heard = Object.entries(declaration.hears ?? {});
  const hearHandlers = handlers('hears', heard.map(([name]) => name), implementation.hears);
  const { timers, onRegistryChange, onStart, onStop } = implementation;
  return {
    declaration,
    role: declaration.role,
    serves: Object.fromEntries(served.map(([name, e]) => [name, isOpened(e) ? { exchange: e.opens, handle: undefined } : { exchange: e, handle: serveHandlers[name] }])),
    hears: Object.fromEntries(heard.map(([name, exchange]) => [name, { exchange, handle: hearHandlers[name] }])),
    ...(timers ? { timers } : {}),
    ...(onRegistryChange ? { onRegistryChange } : {}),
    onStart,
    ...(onStop ? { onStop } : {}),
  };
}

/** Any actor, whatever its state (its state appears both in and out, so no narrower type holds them all). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyActor = Actor<any>;

/**
 * An actor as a process knows it before it runs it: its declaration now, its implementation (the
 * handlers, stores, native modules they use) imported only by a process that starts its role.
 */
export interface LazyActor {
  readonly declaration: ActorDeclaration;
  load(): Promise<AnyActor>;
}

/** `load` imports the actor's module; what it gives must be the actor of this very declaration. */
export function lazyActor(declaration: ActorDeclaration, load: () => Promise<AnyActor>): LazyActor {
  return {
    declaration,
    async load() {
      const actor = await load();
      if (actor.declaration !== declaration) throw new TypeError(`actor ${declaration.role}: the module loaded for it implements another declaration`);
      return actor;
    },
  };
}

export interface RunningActor extends Running {
  readonly role: BusRole;
  stats(): Record<string, EndpointStats>;
}

/** How long a stopping actor waits for the requests it is handling before it closes its state anyway. */
const DRAIN_MS = 5_000;

/**
 * Starts an actor (its declaration and implementation). Each served entry's handler runs behind `serve` (the request
 * checked against its schema, a throw answered at once as its typed error) and is counted; each heard
 * one is guarded (a throw logged and counted, never thrown into the bus); on stop
 * the subscriptions go first, then the requests in flight are waited for (bounded), then the state closes.
 */
export async function startActor<S>(d: Actor<S>, ctx: RoleContext): Promise<RunningActor> {
  checkTables(d.role, Object.entries(d.serves).map(([name, e]) => [name, e.exchange]), Object.entries(d.hears).map(([name, h]) => [name, h.exchange]));
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
    for (const [name, h] of Object.entries(d.hears)) {
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
