import { at, type Addressed, type AnyAddressed, type AnyExchange, type Exchange } from '../../bus/exchange.js';
import { hear, serve } from '../../bus/verbs.js';
import type { Subscription } from '../../bus/bus.js';
import { isFault, type PierError } from '../../bus/errors.js';
import type { BusRole, Declaration, JetStreamDeclaration } from '../../bus/permissions.js';
import type { Change, EndpointStats } from '../../bus/subjects.js';
import type { RoleContext, Running } from './runtime.js';

/**
 * An actor is a declaration: what it serves, hears, calls and emits on the bus, its timers and
 * how it starts and stops. `startActor` wires any declaration the same way (subscribes, checks
 * schemas, answers errors, counts, drains on stop), and `busDeclarationOf` turns the same object
 * into the role's permissions (cli/roles.ts): what a role may do on the bus is written once.
 *
 * `S` is the actor's state, built by `onStart` from the role's context (its stores, its policies);
 * every handler gets it first.
 */
export interface ActorDeclaration<S> {
  readonly role: BusRole;
  /** Request/reply endpoints (bus/subjects-*.ts), each with its handler. */
  readonly endpoints: Readonly<Record<string, ServedEndpoint<S>>>;
  /** Request/reply on run-time subjects (one replica's own): the subject built from this process's bus id. */
  readonly channels?: Readonly<Record<string, AnsweredChannel<S>>>;
  /** One-way messages on run-time subjects (this replica's own), built from this process's bus id. */
  readonly listens?: Readonly<Record<string, HeardSignal<S>>>;
  /** Events heard (every replica hears each one). */
  readonly hears?: Readonly<Record<string, HeardEvent<S>>>;
  /** Endpoints it calls, events it emits. */
  readonly calls?: ReadonlyArray<AnyAddressed>;
  readonly emits?: ReadonlyArray<Addressed<unknown, never> | string>;
  /**
   * Subjects used at run time outside the tables above (a write session's own subject, a pulled
   * stream), as NATS patterns. Kept here so that they are still declared in one place.
   */
  readonly dynamic?: { readonly serves?: readonly string[]; readonly calls?: readonly string[] };
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

export interface ServedEndpoint<S> {
  readonly endpoint: AnyAddressed;
  readonly handle: (state: S, req: never) => unknown;
}

export interface AnsweredChannel<S> {
  readonly channel: AnyExchange;
  readonly subject: (busId: string) => string;
  readonly handle: (state: S, req: never) => unknown;
}

export interface HeardSignal<S> {
  readonly signal: Exchange<unknown, never>;
  readonly subject: (busId: string) => string;
  readonly handle: (state: S, value: never) => void;
}

export interface HeardEvent<S> {
  readonly event: Addressed<unknown, never>;
  readonly handle: (state: S, value: never) => void;
}

export interface ActorTimer<S> {
  readonly everyMs: (ctx: RoleContext) => number;
  /** Once, `everyMs` after the start, rather than every `everyMs`. */
  readonly once?: boolean;
  readonly run: (state: S) => Promise<unknown> | unknown;
}

/** Typed entries: the handler's request is the endpoint's (the tables above erase it). */
export function serves<S, Req, Res>(endpoint: Addressed<Req, Res>, handle: (state: S, req: Req) => Res | Promise<Res>): ServedEndpoint<S> {
  return { endpoint, handle } as unknown as ServedEndpoint<S>;
}

export function answers<S, Req, Res>(channel: Exchange<Req, Res>, subject: (busId: string) => string, handle: (state: S, req: Req) => Res | Promise<Res>): AnsweredChannel<S> {
  return { channel, subject, handle } as unknown as AnsweredChannel<S>;
}

export function listens<S, T>(signal: Exchange<T, never>, subject: (busId: string) => string, handle: (state: S, value: T) => void): HeardSignal<S> {
  return { signal, subject, handle } as unknown as HeardSignal<S>;
}

export function hears<S, T>(event: Addressed<T, never>, handle: (state: S, value: T) => void): HeardEvent<S> {
  return { event, handle } as unknown as HeardEvent<S>;
}

export const defineActor = <S>(d: ActorDeclaration<S>): ActorDeclaration<S> => d;

/** Any actor, whatever its state (its state appears both in and out, so no narrower type holds them all). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyActor = ActorDeclaration<any>;

/** The role's bus surface, for its permissions: every subject above, a channel's as a pattern over bus ids. */
export function busDeclarationOf(d: AnyActor): Declaration {
  return {
    serves: [
      ...Object.values(d.endpoints).map((e) => e.endpoint.subject),
      ...Object.values(d.channels ?? {}).map((c) => c.subject('*')),
      ...Object.values(d.listens ?? {}).map((l) => l.subject('*')),
      ...(d.dynamic?.serves ?? []),
    ],
    hears: Object.values(d.hears ?? {}).map((h) => h.event.subject),
    calls: [...(d.calls ?? []).map((e) => e.subject), ...(d.dynamic?.calls ?? [])],
    emits: (d.emits ?? []).map((e) => (typeof e === 'string' ? e : e.subject)),
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
 * Starts an actor from its declaration. Each endpoint's handler runs behind `serve` (the request
 * checked against its schema, a throw answered at once as its typed error) and is counted; on stop
 * the subscriptions go first, then the requests in flight are waited for (bounded), then the state closes.
 */
export async function startActor<S>(d: ActorDeclaration<S>, ctx: RoleContext): Promise<RunningActor> {
  const state = await d.onStart(ctx);
  const stats: Record<string, EndpointStats> = {};
  const inFlight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inFlight.add(p);
    void p.then(
      () => inFlight.delete(p),
      () => inFlight.delete(p),
    );
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
  try {
    for (const [name, e] of Object.entries(d.endpoints)) {
      stats[name] = { subject: e.endpoint.subject, requests: 0, errors: 0, processingMs: 0, averageMs: 0, lastError: null, faults: 0, lastFault: null };
      const handle = e.handle as (state: S, req: unknown) => unknown;
      subs.push(serve(ctx.bus, e.endpoint, (req) => track(Promise.resolve().then(() => handle(state, req))), { observe: observe(name) }));
    }
    for (const c of Object.values(d.channels ?? {})) {
      const handle = c.handle as (state: S, req: unknown) => unknown;
      subs.push(serve(ctx.bus, at(c.channel, c.subject(ctx.peers.self.busId)), (req) => track(Promise.resolve().then(() => handle(state, req)))));
    }
    for (const [name, l] of Object.entries(d.listens ?? {})) {
      const handle = l.handle as (state: S, value: unknown) => void;
      subs.push(hear(ctx.bus, at(l.signal, l.subject(ctx.peers.self.busId)), (value) => guarded(ctx, `${d.role} signal ${name}`, () => handle(state, value))));
    }
    for (const [name, h] of Object.entries(d.hears ?? {})) {
      const handle = h.handle as (state: S, value: unknown) => void;
      subs.push(hear(ctx.bus, h.event, (value) => guarded(ctx, `${d.role} event ${name}`, () => handle(state, value))));
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
      const drained = Promise.allSettled([...inFlight]);
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
