import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { HISTORY_STREAM, HISTORY_SUBJECTS } from '../../bus/subjects.js';
import { JetStreamHistory } from '../../actors/history/store-jetstream.js';
import { HistorySeal } from '../../actors/history/seal.js';
import { epochOf } from '../../actors/history/stream-epoch.js';
import { retryWhileStarting } from '../../lib/state/jetstream.js';
import { startJetStreamCluster, type NatsServer } from '../helpers/nats-server.js';
import { until } from '../helpers/wait.js';

// The history stream's epoch on a 3-node cluster (docs/gateway.md "History and recovery"): every
// edge names the stream alike, whichever node it reached it through and whichever replica led it
// then. Each replica reports its own creation time; edges that named the stream by it disagreed,
// and a chaos run lost acknowledged sends where two edges' messages met on one chain.
const seal = new HistorySeal([randomBytes(32)]);
const options = { replicas: 3, ceilings: { messages: 100, bytes: 1 << 20, ttlMs: 60_000 }, storeBytes: 8 << 20, messageBytes: 4096 };
const chain = { user: 'alice', app: 'chat', install: 'i1' };
const bounds = options.ceilings;

async function cluster(): Promise<{ conns: NatsConnection[]; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'pier-hist-epoch-'));
  const nodes: NatsServer[] = await startJetStreamCluster(dir, 3);
  const conns = await Promise.all(nodes.map((n) => connect({ servers: n.url })));
  // JetStream answers once the cluster has elected its meta leader.
  for (const nc of conns) await retryWhileStarting(() => nc.jetstreamManager());
  return {
    conns,
    close: async () => {
      await Promise.all(conns.map((c) => c.close()));
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const open = async (nc: NatsConnection) => JetStreamHistory.open(nc.jetstream(), await nc.jetstreamManager(), seal, options);
const leaderOf = async (nc: NatsConnection) => (await (await nc.jetstreamManager()).streams.info(HISTORY_STREAM)).cluster?.leader;

/** Moves the stream's leadership to another replica, and waits until one leads again. */
async function stepDown(nc: NatsConnection): Promise<void> {
  const before = await leaderOf(nc);
  await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${HISTORY_STREAM}`, undefined, { timeout: 5_000 });
  await until('another replica to lead the history stream', async () => {
    const now = await leaderOf(nc).catch(() => undefined);
    return now !== undefined && now !== before;
  }, 20_000);
}

test.serial('edges opening through different nodes, under different leaders, name the stream alike; a message kept through one is at the head the others read', async (t) => {
  const c = await cluster();
  const stores: JetStreamHistory[] = [];
  try {
    const created = new Set<string>();
    for (const nc of c.conns) {
      stores.push(await open(nc));
      created.add((await (await nc.jetstreamManager()).streams.info(HISTORY_STREAM)).created);
      await stepDown(nc);
    }
    t.log(`creation times the replicas reported: ${created.size}`);
    const heads = await Promise.all(stores.map((s) => s.head(chain)));
    t.is(new Set(heads.map((h) => h.epoch)).size, 1, JSON.stringify(heads));
    const kept = await stores[0]!.append(chain, 'hello', 5, bounds);
    for (const s of stores) t.deepEqual(await s.head(chain), { epoch: kept.epoch, last: kept.seq });
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    await c.close();
  }
});

test.serial('a stream made by 0.2 (no epoch written) gets one written once; edges opened later, under another leader, read the same; one made again is a new epoch', async (t) => {
  const c = await cluster();
  const stores: JetStreamHistory[] = [];
  try {
    const jsm = await c.conns[0]!.jetstreamManager();
    await jsm.streams.add({ name: HISTORY_STREAM, subjects: [HISTORY_SUBJECTS], num_replicas: 3 });
    stores.push(await open(c.conns[0]!));
    const written = epochOf(await jsm.streams.info(HISTORY_STREAM));
    t.truthy(written, 'the epoch is in the stream');
    await stepDown(c.conns[0]!);
    stores.push(await open(c.conns[1]!), await open(c.conns[2]!));
    const heads = await Promise.all(stores.map((s) => s.head(chain)));
    t.deepEqual(new Set(heads.map((h) => h.epoch.split('-')[0])), new Set([written]));
    t.is(epochOf(await jsm.streams.info(HISTORY_STREAM)), written, 'never written over');

    // History lost: the stream deleted and made again by the next edge to open it.
    await jsm.streams.delete(HISTORY_STREAM);
    stores.push(await open(c.conns[1]!));
    const again = await stores[3]!.head(chain);
    t.not(again.epoch.split('-')[0], written);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    await c.close();
  }
});

test.serial('hostile: six edges making the stream at once all answer the one epoch it carries', async (t) => {
  const c = await cluster();
  let stores: JetStreamHistory[] = [];
  try {
    stores = await Promise.all([...c.conns, ...c.conns].map((nc) => open(nc)));
    const carried = epochOf(await (await c.conns[0]!.jetstreamManager()).streams.info(HISTORY_STREAM));
    const heads = await Promise.all(stores.map((s) => s.head(chain)));
    t.deepEqual(new Set(heads.map((h) => h.epoch.split('-')[0])), new Set([carried]));
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    await c.close();
  }
});
