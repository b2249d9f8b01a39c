import { at, exchange } from '../../../bus/exchange.js';
import { ask, tell } from '../../../bus/verbs.js';
import test from 'ava';
import { Writable } from 'node:stream';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { decode } from '../../../bus/codec.js';
import { PierError } from '../../../bus/errors.js';
import type { Change } from '../../../bus/subjects.js';
import { declareActor } from '../../../lib/runtime/actor-declaration.js';
import { defineActor, lazyActor, startActor } from '../../../lib/runtime/actor.js';
import { createLogger } from '../../../lib/runtime/log.js';
import { Metrics } from '../../../lib/runtime/metrics.js';
import type { RoleContext } from '../../../lib/runtime/runtime.js';
import { until, within } from '../../helpers/wait.js';

// One generic start for every actor (lib/runtime/actor.ts): a declaration's endpoints answer their typed
// errors at once, are counted per endpoint, survive their handlers' bugs, and drain on stop.

const LONG = 60_000; // a deadline no test waits out: an answer must come from the handler
const echo = exchange<{ n: number }, { n: number }>({ subject: 't.echo', queue: 't', request: { n: 'number' }, timeoutMs: LONG });
const fails = exchange<{ n: number }, { n: number }>({ subject: 't.fails', queue: 't', request: { n: 'number' }, timeoutMs: LONG });
const crashes = exchange<{ n: number }, { n: number }>({ subject: 't.crashes', queue: 't', request: { n: 'number' }, timeoutMs: LONG });
const slow = exchange<{ n: number }, { n: number }>({ subject: 't.slow', queue: 't', request: { n: 'number' }, timeoutMs: LONG });
const poked = exchange<{ n: number }>({ subject: 't.poked', request: { n: 'number' }, oneWay: true });

function context(bus: MemoryBus): RoleContext & { changes: Array<(c: Change) => void> } {
  const changes: Array<(c: Change) => void> = [];
  const log = createLogger({ level: 'silent', name: 'test', destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  return {
    bus,
    log,
    metrics: new Metrics('t'),
    now: Date.now,
    cache: { onApplied: (f: (c: Change) => void) => (changes.push(f), () => changes.splice(changes.indexOf(f), 1)) },
    peers: { self: { busId: 'b1' } },
    changes,
  } as unknown as RoleContext & { changes: Array<(c: Change) => void> };
}

interface State {
  heard: number[];
  ticks: number;
  closed: boolean;
  release: () => void;
  gate: Promise<void>;
}

const declared = declareActor({ role: 'upload', serves: { echo, fails, crashes, slow }, hears: { poked } });

function declaration() {
  return defineActor(declared, {
    serves: {
      echo: (_s: State, req) => ({ n: req.n }),
      fails: () => {
        throw new PierError('CONFLICT', 'upload busy');
      },
      crashes: (): { n: number } => {
        throw new Error('a bug with a secret path /srv/keys');
      },
      slow: async (s: State, req) => {
        await s.gate;
        if (s.closed) throw new Error('answered after the state closed');
        return { n: req.n };
      },
    },
    hears: {
      poked: (s: State, v) => {
        if (v.n < 0) throw new Error('a bug in an event handler');
        s.heard.push(v.n);
      },
    },
    timers: {
      tick: {
        everyMs: () => 5,
        run: (s: State) => {
          s.ticks++;
          if (s.ticks === 1) throw new Error('a bug in a timer');
        },
      },
    },
    onRegistryChange: () => {
      throw new Error('a bug in a registry hook');
    },
    onStart: async (): Promise<State> => {
      let release = () => undefined as void;
      const gate = new Promise<void>((r) => (release = r));
      return { heard: [], ticks: 0, closed: false, release, gate };
    },
    onStop: async (s: State) => {
      s.closed = true;
    },
  });
}

test('a thrower behind an endpoint: its caller hears the typed error at once; an unknown failure is a bare INTERNAL; both counted', async (t) => {
  const bus = new MemoryBus();
  const actor = await startActor(declaration(), context(bus));
  t.deepEqual(await ask(bus, echo, { n: 1 }), { n: 1 });
  const typed = await within('the typed error', t.throwsAsync(ask(bus, fails, { n: 1 }), { instanceOf: PierError }), 5_000);
  t.is(typed!.code, 'CONFLICT');
  const unknown = await within('the internal error', t.throwsAsync(ask(bus, crashes, { n: 1 }), { instanceOf: PierError }), 5_000);
  t.is(unknown!.code, 'INTERNAL');
  t.false(unknown!.message.includes('/srv/keys'));
  // A request that is no msgpack at all, straight onto the bus: answered too, as a 400.
  const garbled = await within('the answer to a garbled request', bus.request(echo.subject, new Uint8Array([0xc1]), { timeoutMs: LONG }), 5_000);
  t.like(decode<{ ok: boolean; error: { code: string } }>(garbled.data), { ok: false, error: { code: 'BAD_REQUEST' } });
  const stats = actor.stats();
  t.is(stats.echo.requests, 2);
  t.is(stats.echo.errors, 1, 'the garbled one');
  t.is(stats.fails.errors, 1);
  t.is(stats.fails.lastError!.code, 'CONFLICT');
  t.is(stats.crashes.lastError!.code, 'INTERNAL');
  // A refusal of what was asked (409, 400) is no fault of the process; a throw (500) is.
  t.is(stats.fails.faults, 0);
  t.is(stats.fails.lastFault, null);
  t.is(stats.echo.faults, 0, 'a garbled request is the sender\'s');
  t.is(stats.crashes.faults, 1);
  t.is(stats.crashes.lastFault!.code, 'INTERNAL');
  t.is(stats.echo.subject, 't.echo');
  t.true(stats.echo.averageMs >= 0);
  await actor.stop();
  await bus.close();
});

test('an event, timer or registry hook that throws is counted and logged; the actor goes on', async (t) => {
  const bus = new MemoryBus();
  const ctx = context(bus);
  let state: State | undefined;
  const d = declaration();
  const actor = await startActor({ ...d, onStart: async (c) => (state = await d.onStart(c)) }, ctx);
  tell(bus, poked, { n: -1 });
  tell(bus, poked, { n: 2 });
  await until('the second event heard', () => state!.heard.includes(2), 5_000);
  ctx.changes.forEach((f) => f({ kind: 'app', op: 'delete' } as Change));
  await until('the timer to run again after its failing run', () => state!.ticks >= 3, 5_000);
  const failures = await ctx.metrics.handlerFailures.get();
  const where = failures.values.map((v) => v.labels.where).sort();
  t.deepEqual(where, ['upload event poked', 'upload registry change', 'upload timer tick']);
  t.deepEqual(await ask(bus, echo, { n: 5 }), { n: 5 }, 'still serving');
  await actor.stop();
  await bus.close();
});

test('stop drains: a request in flight is answered before the state closes; afterwards nothing is served', async (t) => {
  const bus = new MemoryBus();
  let state: State | undefined;
  const d = declaration();
  const actor = await startActor({ ...d, onStart: async (c) => (state = await d.onStart(c)) }, context(bus));
  const inFlight = ask(bus, slow, { n: 7 });
  await until('the slow request to reach its handler', () => actor.stats().slow !== undefined && state !== undefined, 5_000);
  await new Promise((r) => setImmediate(r));
  const stopping = actor.stop();
  state!.release();
  t.deepEqual(await within('the request in flight to be answered', inFlight, 5_000), { n: 7 });
  await stopping;
  t.true(state!.closed);
  await t.throwsAsync(ask(bus, echo, { n: 1 }), { message: /no t replica is running/ });
  const ticks = state!.ticks;
  await new Promise((r) => setTimeout(r, 20));
  t.is(state!.ticks, ticks, 'timers stopped with the actor');
  await bus.close();
});

test('entries on this replica\'s own subject are served and heard there; an entry in the wrong table is refused at start', async (t) => {
  const bus = new MemoryBus();
  const own = exchange<{ n: number }, { n: number }>({ request: { n: 'number' }, reply: { n: 'number' }, timeoutMs: LONG });
  const told = exchange<{ n: number }>({ request: { n: 'number' }, oneWay: true });
  const heard: number[] = [];
  const d = defineActor(declareActor({ role: 'callback', serves: { own: at(own, (busId) => `t.own.${busId}`) }, hears: { told: at(told, (busId) => `t.told.${busId}`) } }), {
    serves: { own: (_s: null, req) => ({ n: req.n + 1 }) },
    hears: { told: (_s: null, v) => void heard.push(v.n) },
    onStart: async () => null,
  });
  const actor = await startActor(d, context(bus));
  t.deepEqual(await ask(bus, at(own, 't.own.b1'), { n: 1 }), { n: 2 });
  tell(bus, at(told, 't.told.b1'), { n: 3 });
  await until('the message told to this replica\'s subject', () => heard.includes(3), 5_000);
  t.deepEqual(Object.keys(actor.stats()), [], 'an entry on a replica\'s own subject is not counted, as before');
  await actor.stop();
  const wrong = { ...d, serves: { ...d.serves, told: { exchange: poked, handle: () => undefined } } };
  await t.throwsAsync(startActor(wrong, context(bus)), { instanceOf: TypeError, message: /serves\.told is a one-way exchange/ });
  await bus.close();
});

test('an implementation must handle every entry of its declaration, and nothing else; a lazy actor must load its own declaration\'s', async (t) => {
  const implementation = { serves: { echo: () => ({ n: 1 }), fails: () => ({ n: 1 }), crashes: () => ({ n: 1 }) }, hears: { poked: () => undefined }, onStart: async () => null };
  t.throws(() => defineActor(declared, implementation as never), { instanceOf: TypeError, message: 'actor upload: serves handlers missing for slow' });
  t.throws(() => defineActor(declared, { ...implementation, hears: { poked: () => undefined, other: () => undefined } } as never), { instanceOf: TypeError, message: /missing for slow/ });
  t.throws(() => defineActor(declareActor({ role: 'upload', serves: {}, hears: { poked } }), { serves: {}, hears: { poked: () => undefined, other: () => undefined }, onStart: async () => null } as never), {
    instanceOf: TypeError,
    message: 'actor upload: hears handlers given for other, which is not declared',
  });
  let loads = 0;
  const lazy = lazyActor(declared, async () => (loads++, declaration()));
  t.is(loads, 0, 'nothing loaded before it is asked for');
  t.is((await lazy.load()).declaration, declared);
  const other = lazyActor(declareActor({ ...declared }), async () => declaration());
  await t.throwsAsync(other.load(), { instanceOf: TypeError, message: /implements another declaration/ });
});
