import test from 'ava';
import { Connections, type Ws } from '../../../edge/gateway/gateway-connections.js';
import type { Conn } from '../../../edge/gateway/gateway-admission.js';
import { Delivery } from '../../../edge/gateway/gateway-delivery.js';
import type { GatewayMetrics } from '../../../edge/gateway/gateway-metrics.js';
import { Recoveries } from '../../../edge/gateway/gateway-recovery.js';
import type { HistoryClient } from '../../../edge/gateway/history/history-client.js';
import type { KeptEntry, Recovery } from '../../../bus/subjects.js';
import type { RoleContext } from '../../../lib/runtime/runtime.js';

// Two connections of one user recover on one edge at once (a 10-minute chaos run, seed 7284). The
// replay read first ends at 795; the other, read later, ends at 797, and its end starts the chain's
// live order here first. Message 797 then comes live and is taken as delivered (not after the
// chain's last): the connection whose replay ended at 795 must still get it.

const EPOCH = 'e1';
const chain = 'alice/chat';
const kept: KeptEntry[] = [793, 795, 797].map((seq, i, all) => ({ seq, prev: i === 0 ? 791 : all[i - 1]!, at: 0, bytes: 3, text: `"m${seq}"` }));

function fakeWs(connId: string, frames: string[], closes: number[]): Ws {
  const c = { connId, user: 'alice', app: 'chat', open: true, silent: true, seq: 0, cookie: '', recover: { since: { epoch: EPOCH, offset: 795 }, replaying: true, held: [], heldBytes: 0, inbound: [], inboundBytes: 0, position: 0, reserved: 0 } } as unknown as Conn;
  return {
    getUserData: () => c,
    send: (text: string) => (frames.push(text), 1),
    getBufferedAmount: () => 0,
    cork: (fn: () => void) => fn(),
    end: (code: number) => {
      closes.push(code);
      c.open = false;
    },
  } as unknown as Ws;
}

function edge(between: (after: number, until: number) => Promise<KeptEntry[]> = async (after, until) => kept.filter((e) => e.seq > after && e.seq < until)) {
  const connections = new Connections();
  const metrics = { messagesOut: { inc: () => undefined }, recoveries: { inc: () => undefined }, gapsSkipped: { inc: () => undefined } } as unknown as GatewayMetrics;
  const delivery = new Delivery(connections, metrics, 1 << 20);
  const history = {
    boundsOf: () => ({ bytes: 0, messages: 100 }),
    // Each replay answers when the test says (its read's moment decides what it holds).
    recover: () => new Promise<Recovery>((resolve) => pending.push(resolve)),
    between: (_app: unknown, after: number, until: number) => between(after, until),
    head: async () => ({ epoch: EPOCH, last: 797 }),
  } as unknown as HistoryClient;
  const pending: Array<(r: Recovery) => void> = [];
  const ctx = { config: { gateway: { history: { replayBytesPerMin: 1 << 30 } } }, cache: { app: () => ({ id: chain, user: 'alice', name: 'chat' }) }, log: { warn: () => undefined } } as unknown as RoleContext;
  const recoveries = new Recoveries(ctx, history, connections, delivery, metrics, () => false);
  return { connections, delivery, recoveries, pending };
}

const replayOf = (offset: number, seqs: number[]): Recovery => ({ recovered: true, epoch: EPOCH, offset, missed: seqs.length, replay: seqs.map((s) => ({ seq: s, text: `"m${s}"` })), bytes: 0, read: 0 });
const offsetsIn = (frames: string[]) => frames.map((f) => JSON.parse(f) as { event: string; data: { offset?: number } }).filter((f) => f.event === 'pier.message').map((f) => f.data.offset);

/**
 * Connections A and B of one user on one edge, both recovering from 795. B's replay was read before
 * 797 was kept, A's after; A's answer comes first and starts the chain's order here at 797.
 */
async function twoRecoveries(between?: Parameters<typeof edge>[0]) {
  const { connections, delivery, recoveries, pending } = edge(between);
  const framesA: string[] = [];
  const framesB: string[] = [];
  const closes: number[] = [];
  const a = fakeWs('a', framesA, closes);
  const b = fakeWs('b', framesB, closes);
  for (const ws of [b, a]) if (connections.add(ws, () => ({ unsubscribe: () => undefined }) as never)) delivery.order!.track(chain, true);
  const recoveringB = recoveries.recover(b, b.getUserData());
  const recoveringA = recoveries.recover(a, a.getUserData());
  const [answerB, answerA] = pending;
  answerA!(replayOf(797, [797]));
  await recoveringA;
  answerB!(replayOf(795, []));
  await recoveringB;
  return { delivery, framesA, framesB, closes };
}

test('two connections recovering at once on one edge: the one whose replay ends first still gets what the other\'s replay started the chain past', async (t) => {
  const { delivery, framesA, framesB, closes } = await twoRecoveries();
  // 797 now comes live (its send reached this edge after both replays): not after the chain's last.
  delivery.command({ op: 'send', appId: chain, users: ['alice'], text: '"m797"', kept: { seq: 797, prev: 795, epoch: EPOCH } } as never);
  delivery.flushGathered();
  t.deepEqual(offsetsIn(framesA), [797], 'A: its replay');
  t.deepEqual(offsetsIn(framesB), [797], 'B: 797 once, read for it since the chain here had gone past its replay');
  t.deepEqual(closes, []);
  const frame = JSON.parse(framesB[0]!) as { event: string; data: { offset: number; missed: number } };
  t.like(frame, { event: 'pier.recovery', data: { offset: 795, missed: 0 } }, 'its recovery frame says what its replay held; 797 follows it as a live message');
});

test('hostile: what the chain went past cannot be read (the history out of reach): that connection is ended with 4005 to recover again, nothing sent out of order', async (t) => {
  const { framesA, framesB, closes } = await twoRecoveries(async () => {
    throw new Error('no responders');
  });
  t.deepEqual(closes, [4005], 'B ended: reconnecting, its replay gives it 797');
  t.deepEqual(framesB, [], 'nothing sent to B');
  t.deepEqual(offsetsIn(framesA), [797]);
});
