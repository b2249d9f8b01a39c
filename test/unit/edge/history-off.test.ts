import test from 'ava';
import { historyOff, type HistorySettings } from '../../../edge/gateway/history-off.js';

// Issue #53: the README's cluster edge said "gateway history: off ... neither the master key nor
// PIER_HISTORY_KEY", and with PIER_HISTORY_KEY given it would then have said that on NATS it needs
// PIER_STATE=jetstream: one warning per start, each naming one cause. One line now names them all.

const settings = (over: { on?: boolean; keys?: boolean; nats?: boolean; state?: 'lmdb' | 'jetstream' }): HistorySettings => ({
  natsUrl: over.nats === false ? null : 'nats://127.0.0.1:4222',
  state: { kind: over.state ?? 'lmdb', replicas: 1 },
  gateway: { history: { on: over.on ?? true, keys: over.keys === false ? null : [Buffer.alloc(32)] } },
});

const KEY = 'PIER_HISTORY_KEY is not set and this edge holds no master key to derive the key from: set PIER_HISTORY_KEY to the history.key file `pier bus anchors --out DIR` writes (from the master key)';
const STATE = 'PIER_STATE is lmdb, and on NATS the history is kept on JetStream, where every edge reaches it: set PIER_STATE=jetstream (nats-server with JetStream; PIER_JS_REPLICAS=1 on a single server)';

test('an edge on NATS with neither a key nor JetStream is told both, in one line', (t) => {
  t.is(historyOff(settings({ keys: false })), `gateway history: off on this edge (sends answer kept: false): ${KEY}; and ${STATE}`);
});

test('each missing setting alone is named alone', (t) => {
  t.is(historyOff(settings({ keys: false, state: 'jetstream' })), `gateway history: off on this edge (sends answer kept: false): ${KEY}`);
  t.is(historyOff(settings({ keys: true, state: 'lmdb' })), `gateway history: off on this edge (sends answer kept: false): ${STATE}`);
});

test('nothing to say when the history can be kept, or was turned off', (t) => {
  t.is(historyOff(settings({ state: 'jetstream' })), null, 'a key and JetStream');
  t.is(historyOff(settings({ nats: false })), null, 'one process keeps it in LMDB');
  t.is(historyOff(settings({ on: false, keys: false })), null, 'PIER_WS_HISTORY=off: the operator chose');
  t.is(historyOff(settings({ nats: false, keys: false })), `gateway history: off on this edge (sends answer kept: false): ${KEY}`);
});
