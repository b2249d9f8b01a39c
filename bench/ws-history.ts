import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { freePort, startChild, startReceivers } from './children.js';
import { cpuSeconds } from './goals.js';
import { maxRate, postLoop, round, type Target } from './load.js';
import { pinServer, SERVER_NODE_FLAGS } from './pinning.js';
import { broadcastRate, openMany, roundTrips, stopChild } from './ws-common.js';
import { recoveryCost } from './ws-recovery.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { startJetStreamCluster } from '../test/helpers/nats-server.js';

/**
 * What gateway history costs (docs/gateway.md "History and recovery"): the same measurements with
 * history on and off, in one Pier. The method: every user has two installs of the same app, `chat`
 * (history on, the default) and `quiet` (its manifest says `history: false`), each with its own
 * app process; each measurement runs on `chat`, then on `quiet`, in the same process. One process
 * rather than two (`PIER_WS_HISTORY=off` on a second Pier): its JIT, heap, store and connections are
 * the same for both, so what differs between the two figures is the send path alone (the keep,
 * its fsync, the seal, the ordering), not two processes' luck on a noisy VM. The path of an app with
 * `history: false` is the path of a process with history off: the keep is skipped before anything
 * is written (the edge asks the history actor nothing: HistoryClient.keep answers null), and nothing is ordered.
 */

/** Users of the round trip by user: each holds one connection per app, so a send to the user reaches one. */
const RT_USERS = 10;
/**
 * Messages each of those connections sends a second: 200 a second in all. Callbacks of one connection
 * go one at a time (docs/protocol.md "Callbacks to the app"), so a stall of the server core queues
 * every message behind it on each connection; at 100 a second each, a few such stalls on this shared VM
 * left queues of seconds that never drained (the floor's kept sends too), which measured the queue.
 */
const RT_PER_SECOND = 20;
const BROADCAST_CONNS = 1000;
const BROADCAST_RECEIVERS = 4;
const SEND_CLIENTS = 8;
/** Recoveries timed per measurement (one after another). */
const RECOVERIES = 50;

type Creds = { OS_APP_KEY: string; OS_APP_SECRET: string };
const newCreds = (): Creds => ({ OS_APP_KEY: `ak_${randomBytes(12).toString('base64url')}`, OS_APP_SECRET: randomBytes(24).toString('base64url') });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sendBody = (user: string) => JSON.stringify({ users: [user], payload: { event: 'news', data: 'x'.repeat(64) } });
const headersOf = (c: Creds) => ({ 'content-type': 'application/json', 'x-app-key': c.OS_APP_KEY, 'x-app-secret': c.OS_APP_SECRET });

/** The two installs compared: history on (the default) and off (the manifest's `history: false`). */
const APPS = { on: 'chat', off: 'quiet' } as const;
type Side = keyof typeof APPS;

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

/** A Pier with users alice and r0..r9, each with `chat` and `quiet` installed, and one app process per app. */
async function historyPier(dir: string, extraEnv: Record<string, string>, children: ChildProcess[]) {
  mkdirSync(dir, { recursive: true });
  const pier = await PierProcess.start(
    pierEnv(join(dir, 'data'), { PIER_WS_IDLE_MS: '600000', PIER_WS_CONNS_PER_USER: '100000', PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' '), ...extraEnv }),
    [],
    60_000,
  );
  pinServer(pier.proc.pid);
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const users = ['alice', ...Array.from({ length: RT_USERS }, (_, i) => `r${i}`)];
  const tokens: Record<string, string> = {};
  await inBatches(users, 6, async (u) => {
    const r = await cli(['user', 'add', u, '--json'], env);
    if (r.code !== 0) throw new Error(`pier user add ${u}: ${r.stderr}`);
    tokens[u] = r.json.token;
  });
  const creds = {} as Record<Side, Record<string, Creds>>;
  for (const side of ['on', 'off'] as const) {
    const name = APPS[side];
    // The app must know its credentials before Pier knows its port: made here, installed with them.
    creds[side] = Object.fromEntries(users.map((u) => [u, newCreds()]));
    writeFileSync(join(dir, `${name}-creds.json`), JSON.stringify(creds[side]));
    const main = creds[side].alice!;
    const app = await startChild('./ws-app.js', [String(pier.ports!.local), main.OS_APP_KEY, main.OS_APP_SECRET, join(dir, `${name}-creds.json`)], SERVER_NODE_FLAGS);
    children.push(app.proc);
    writeFileSync(join(dir, `${name}.yaml`), `metadata: { name: ${name} }\noptions:\n  websocket: { url: /cb, port: ${app.port}${side === 'off' ? ', history: false' : ''} }\n`);
    await inBatches(users, 6, async (u) => {
      writeFileSync(join(dir, `${name}-${u}.json`), JSON.stringify(creds[side][u]));
      const r = await cli(['app', 'install', '--user', u, '--manifest', join(dir, `${name}.yaml`), '--credentials', join(dir, `${name}-${u}.json`)], env);
      if (r.code !== 0) throw new Error(`pier app install ${name} for ${u}: ${r.stderr}`);
    });
  }
  // Measured only once each side does what it says: `chat` keeps (kept: true), `quiet` does not.
  const local = `http://127.0.0.1:${pier.ports!.local}`;
  for (const side of ['on', 'off'] as const) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const answer = await fetch(`${local}/runtime/ws/conn/send`, { method: 'POST', headers: headersOf(creds[side].alice!), body: sendBody('alice') })
        .then((r) => r.json() as Promise<{ data?: { kept?: boolean } }>)
        .catch(() => ({ data: undefined }));
      if (answer.data?.kept === (side === 'on')) break;
      if (Date.now() > deadline) throw new Error(`history ${side}: send answered ${JSON.stringify(answer)}`);
      await pause(250);
    }
  }
  return { pier, tokens, creds, local };
}

type HistoryPier = Awaited<ReturnType<typeof historyPier>>;

/** Browser → callback → app → send to the user → browser, one connection per user (`RT_USERS`), `RT_PER_SECOND` each. */
async function roundTripByUser(port: number, host: (i: number) => string, token: (i: number) => string) {
  const conns = await openMany(RT_USERS, port, host, token);
  try {
    return await roundTrips(conns, { perSecond: RT_PER_SECOND, event: 'rt-user' });
  } finally {
    for (const ws of conns) ws.terminate();
    await pause(500);
  }
}

type Receivers = Awaited<ReturnType<typeof startReceivers>>;

/**
 * What one send costs: `SEND_CLIENTS` clients sending to a user who holds one connection
 * (`receiver`, open already), back to back, 5 s after 1 s of warm-up: sends a second, their answers'
 * p50/p99 (the app's view: with history on, the answer waits for the write), CPU of the server-side
 * processes per send.
 */
async function sendCost(local: string, creds: Creds, user: string, receiver: Receivers, pids: { server: number; store?: number[] }) {
  const target: Target = { origin: local, path: '/runtime/ws/conn/send', method: 'POST', headers: headersOf(creds), body: Buffer.from(sendBody(user)) };
  await maxRate(target, SEND_CLIENTS, 1);
  await pause(300);
  const from = await receiver.received();
  const cpu = (list: number[]) => list.reduce((sum, p) => sum + cpuSeconds(p), 0);
  const before = { server: cpu([pids.server]), store: cpu(pids.store ?? []) };
  const run = await maxRate(target, SEND_CLIENTS, 5);
  const used = { server: cpu([pids.server]) - before.server, store: cpu(pids.store ?? []) - before.store };
  await pause(300);
  const delivered = (await receiver.received()) - from;
  const perSend = (seconds: number) => round((seconds * 1e6) / Math.max(1, run.requests), 1);
  await pause(700);
  return {
    sends_per_s: run.rps,
    p50_ms: run.p50_ms,
    p99_ms: run.p99_ms,
    errors: run.errors,
    delivered_per_s: Math.round(delivered / 5),
    cpu_us_per_send: perSend(used.server),
    ...(pids.store ? { nats_cpu_us_per_send: perSend(used.store) } : {}),
  };
}

/** Messages a second delivered to `receivers` (one user's `BROADCAST_CONNS` connections, open already), `SEND_CLIENTS` sends at once (as ws.ts's broadcast). */
async function broadcast(local: string, creds: Creds, receivers: Receivers) {
  const api = new Pool(local, { connections: SEND_CLIENTS });
  try {
    const sender = postLoop(api, '/runtime/ws/conn/send', headersOf(creds), sendBody('alice'), SEND_CLIENTS);
    const { rate, utilisation } = await broadcastRate(receivers, sender.drive);
    return { messages_per_s: Math.round(rate), send_errors: sender.errors(), client_event_loop_utilisation: utilisation.loadgen_event_loop_utilisation };
  } finally {
    await api.close();
    await pause(1_000);
  }
}

/** Receivers of both sides, opened before either is measured (their open callbacks over by then), closed after both. */
async function withReceivers<T>(count: number, ws: (side: Side) => { url: string; headers: Record<string, string> }, fn: (r: Record<Side, Receivers>) => Promise<T>): Promise<T> {
  const processes = Math.min(BROADCAST_RECEIVERS, count);
  const r = { on: await startReceivers(processes, count / processes, ws('on').url, ws('on').headers), off: await startReceivers(processes, count / processes, ws('off').url, ws('off').headers) };
  try {
    await pause(3_000);
    return await fn(r);
  } finally {
    r.on.stop();
    r.off.stop();
    // Their close callbacks go through Pier and the app: over before the next phase starts.
    await pause(3_000);
  }
}

const added = (on: { p50_ms: number; p99_ms: number }, off: { p50_ms: number; p99_ms: number }) => ({
  p50_added_by_history_ms: round(on.p50_ms - off.p50_ms, 3),
  p99_added_by_history_ms: round(on.p99_ms - off.p99_ms, 3),
});

/** Every measurement of this file on one Pier (the one-process shape, or over NATS with JetStream), history on then off. */
async function measureShape(h: HistoryPier, storePids?: number[]) {
  const port = h.pier.ports!.public!;
  const wsOf = (side: Side, user: string) => ({ url: `ws://127.0.0.1:${port}/ws`, headers: { host: `${APPS[side]}.${user}.localhost`, 'x-authorization': h.tokens[user]! } });
  const rt = {} as Record<Side, Awaited<ReturnType<typeof roundTripByUser>>>;
  const send = {} as Record<Side, Awaited<ReturnType<typeof sendCost>>>;
  const cast = {} as Record<Side, Awaited<ReturnType<typeof broadcast>>>;
  for (const side of ['on', 'off'] as const) rt[side] = await roundTripByUser(port, (i) => `${APPS[side]}.r${i}.localhost`, (i) => h.tokens[`r${i}`]!);
  // alice: one connection per app for the send cost (r0..r9 hold theirs for the round trips), then 1,000.
  await withReceivers(1, (side) => wsOf(side, 'alice'), async (r) => {
    for (const side of ['on', 'off'] as const) send[side] = await sendCost(h.local, h.creds[side].alice!, 'alice', r[side], { server: h.pier.proc.pid!, ...(storePids ? { store: storePids } : {}) });
  });
  await withReceivers(BROADCAST_CONNS, (side) => wsOf(side, 'alice'), async (r) => {
    for (const side of ['on', 'off'] as const) cast[side] = await broadcast(h.local, h.creds[side].alice!, r[side]);
  });
  // Recoveries (history on only): r1's small replays (one page), then r2's larger than a page (paged).
  const recovery = async (user: string, missed: number, payloadBytes: number, count: number) =>
    recoveryCost({ port, local: h.local, host: `${APPS.on}.${user}.localhost`, token: h.tokens[user]!, headers: headersOf(h.creds.on[user]!), user, missed, payloadBytes, count });
  const recoverySmall = await recovery('r1', 20, 64, RECOVERIES);
  // Each reads some 730 KiB of the user's 16 MiB a minute: 15 stay within it.
  const recoveryPaged = await recovery('r2', 12, 60 * 1024, 15);
  return {
    [`round_trip_by_user_${RT_USERS}_conns_${RT_PER_SECOND}_msg_per_s`]: {
      history_on: rt.on,
      history_off: rt.off,
      ...added(rt.on, rt.off),
      note: `${RT_USERS} users, one connection each; the app answers each message with send {users: [its user]} (kept when history is on); ${RT_USERS * RT_PER_SECOND} round trips a second in all, 10 s after 1 s of warm-up; on, then off`,
    },
    [`send_to_1_conn_${SEND_CLIENTS}_clients`]: {
      history_on: send.on,
      history_off: send.off,
      cpu_us_added_per_send: round(send.on.cpu_us_per_send - send.off.cpu_us_per_send, 1),
      ...added(send.on, send.off),
      note: `${SEND_CLIENTS} clients (the load core, as the app) send {users: [alice]} back to back for 5 s after 1 s of warm-up; alice holds one connection; cpu_us_per_send: the Pier process, from /proc`,
    },
    [`recovery_20_messages`]: { ...recoverySmall, note: `${RECOVERIES} reconnections one after another, each naming the position 20 messages (64-byte payloads) back: from the upgrade request to the replay's last message` },
    [`recovery_12_messages_720_kib`]: { ...recoveryPaged, note: `15 reconnections one after another, each naming the position 12 messages of 60 KiB back (more than one 512 KiB page of replay): from the upgrade request to the replay's last message` },
    [`broadcast_${BROADCAST_CONNS}_conns`]: {
      history_on_messages_per_s: cast.on.messages_per_s,
      history_off_messages_per_s: cast.off.messages_per_s,
      ratio_on_to_off: round(cast.on.messages_per_s / cast.off.messages_per_s, 2),
      send_errors: { history_on: cast.on.send_errors, history_off: cast.off.send_errors },
      client_event_loop_utilisation: { history_on: cast.on.client_event_loop_utilisation, history_off: cast.off.client_event_loop_utilisation },
      note: `as broadcast: ${SEND_CLIENTS} concurrent sends naming alice, who holds ${BROADCAST_CONNS} connections to each app (${BROADCAST_RECEIVERS} receiver processes per app on the load core, all open through both measurements); 1 s warm-up, 5 s measured`,
    },
  };
}

/** The round trips by user and the send cost against the floor (floor-ws.ts), keeping sends to users or not. */
async function floorShape(dir: string) {
  const out = {} as Record<'kept' | 'not_kept', { round_trip: Awaited<ReturnType<typeof roundTripByUser>>; send: Awaited<ReturnType<typeof sendCost>> }>;
  for (const mode of ['kept', 'not_kept'] as const) {
    const creds = newCreds();
    const port = await freePort();
    const app = await startChild('./ws-app.js', [String(port), creds.OS_APP_KEY, creds.OS_APP_SECRET], SERVER_NODE_FLAGS);
    const keepDir = join(dir, `floor-${mode}`);
    mkdirSync(keepDir, { recursive: true });
    const floor = await startChild('./floor-ws.js', [String(port), String(app.port), creds.OS_APP_KEY, creds.OS_APP_SECRET, ...(mode === 'kept' ? [keepDir] : [])], SERVER_NODE_FLAGS);
    try {
      const roundTrip = await roundTripByUser(port, () => 'floor', (i) => `r${i}`);
      const receiver = await startReceivers(1, 1, `ws://127.0.0.1:${port}/ws`, { host: 'floor', 'x-authorization': 'alice' });
      let send;
      try {
        send = await sendCost(`http://127.0.0.1:${port}`, creds, 'alice', receiver, { server: floor.proc.pid! });
      } finally {
        receiver.stop();
      }
      out[mode] = { round_trip: roundTrip, send };
    } finally {
      await stopChild(floor.proc);
      await stopChild(app.proc);
    }
  }
  return {
    [`round_trip_by_user_${RT_USERS}_conns_${RT_PER_SECOND}_msg_per_s`]: { kept: out.kept.round_trip, not_kept: out.not_kept.round_trip, ...added(out.kept.round_trip, out.not_kept.round_trip) },
    [`send_to_1_conn_${SEND_CLIENTS}_clients`]: {
      kept: out.kept.send,
      not_kept: out.not_kept.send,
      cpu_us_added_per_send: round(out.kept.send.cpu_us_per_send - out.not_kept.send.cpu_us_per_send, 1),
      ...added(out.kept.send, out.not_kept.send),
    },
    note: 'floor-ws.ts with a folder: each send to a user sealed (AES-256-GCM) and written in one LMDB transaction (the entry 100 back dropped), answered and delivered once on disk; without: nothing kept. The least keeping costs on this disk',
  };
}

/** One shape's Pier, its app processes stopped and its folder removed whatever happens. */
async function withHistoryPier<T>(dir: string, env: Record<string, string>, fn: (h: HistoryPier) => Promise<T>): Promise<T> {
  const children: ChildProcess[] = [];
  let pier: PierProcess | undefined;
  try {
    const h = await historyPier(dir, env, children);
    pier = h.pier;
    return await fn(h);
  } finally {
    await pier?.stop();
    for (const c of children) await stopChild(c);
  }
}

/** `results.ws.history`: the one-process shape, its floor, and the cluster shape (JetStream R3). */
export async function benchWsHistory(): Promise<Record<string, unknown>> {
  const dir = tempDir('pier-bench-history-');
  try {
    const oneProcess = await withHistoryPier(join(dir, 'one'), {}, (h) => measureShape(h));
    const floor = await floorShape(dir);
    let jetstream: Record<string, unknown>;
    try {
      const nodes = await startJetStreamCluster(join(dir, 'js'), 3);
      for (const n of nodes) pinServer(n.pid);
      try {
        jetstream = await withHistoryPier(join(dir, 'jetstream'), { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3' }, (h) =>
          measureShape(h, nodes.map((n) => n.pid!)),
        );
      } finally {
        await Promise.all(nodes.map((n) => n.stop()));
      }
    } catch (err) {
      process.stderr.write(`bench ws history, JetStream shape: ${(err as Error).stack ?? String(err)}\n`);
      jetstream = { error: String((err as Error).message ?? err) };
    }
    return {
      method:
        'one Pier per shape; every user has the same app installed twice: chat (history on, the default) and quiet (manifest options.websocket.history: false), each with its own app process; every measurement runs on chat, then on quiet, in the same process; clients do not ask for recovery (frames as before)',
      one_process: { shape: 'npm start (one process, in-process bus): history in LMDB, one write transaction per send, answered once on disk', ...oneProcess },
      floor,
      jetstream_r3: {
        shape: 'the same process with PIER_STATE=jetstream on a local 3-node cluster (R3), the bus over NATS too: history is a JetStream publish acknowledged by a quorum per send; the three nodes pinned to the server core with Pier',
        ...jetstream,
      },
    };
  } finally {
    cleanup(dir);
  }
}
