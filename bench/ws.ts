import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { freePort, rssKiB, startChild, startReceivers } from './children.js';
import { ratioAtMost } from './goals.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { postLoop, round } from './load.js';
import { makeCa, makeLeaf } from '../test/helpers/certs.js';
import { pinServer, SERVER_NODE_FLAGS } from './pinning.js';
import { broadcastRate, openMany, roundTrips, stopChild } from './ws-common.js';
import { benchWsHistory } from './ws-history.js';

/** One Pier with the bench's app installed (its own app process), plain or with TLS on the public listener. */
async function pierWithApp(dir: string, extraEnv: Record<string, string>, children: ChildProcess[]) {
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_WS_IDLE_MS: '600000', PIER_WS_CONNS_PER_USER: '100000', PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' '), ...extraEnv }));
  pinServer(pier.proc.pid);
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  // The app must know its credentials before Pier knows its port: the bench makes them, and
  // installs the app with them (--credentials, as for an app moving in).
  const creds = { OS_APP_KEY: `ak_${randomBytes(12).toString('base64url')}`, OS_APP_SECRET: randomBytes(24).toString('base64url') };
  const app = await startChild('./ws-app.js', [String(pier.ports!.local), creds.OS_APP_KEY, creds.OS_APP_SECRET], SERVER_NODE_FLAGS);
  children.push(app.proc);
  writeFileSync(join(dir, 'creds.json'), JSON.stringify(creds));
  writeFileSync(join(dir, 'chat.yaml'), `metadata: { name: chat }\noptions:\n  websocket: { url: /cb, port: ${app.port} }\n`);
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--credentials', join(dir, 'creds.json')], env);
  return { pier, token, creds };
}

/** The round trips of `roundTrips` against the floor (floor-ws.ts) and the same app, in its own process. */
async function floorRoundTrips(creds: { OS_APP_KEY: string; OS_APP_SECRET: string }) {
  const port = await freePort();
  const app = await startChild('./ws-app.js', [String(port), creds.OS_APP_KEY, creds.OS_APP_SECRET], SERVER_NODE_FLAGS);
  const floor = await startChild('./floor-ws.js', [String(port), String(app.port), creds.OS_APP_KEY, creds.OS_APP_SECRET], SERVER_NODE_FLAGS);
  try {
    const conns = await openMany(1000, port, () => 'floor', () => '');
    const result = await roundTrips(conns);
    for (const ws of conns) ws.terminate();
    return result;
  } finally {
    await stopChild(floor.proc);
    await stopChild(app.proc);
  }
}

/**
 * The gateway under load, one-process Pier (the `npm start` shape): round trips through the
 * callback actor and an app in its own process; broadcast next to a bare uWS publish; memory per
 * idle connection.
 */
export async function benchWs(): Promise<Record<string, unknown>> {
  const dir = tempDir('pier-bench-');
  const children: ChildProcess[] = [];
  const { pier, token, creds } = await pierWithApp(join(dir, 'plain'), {}, children);
  try {
    const port = pier.ports!.public!;
    const host = 'chat.alice.localhost';

    // 1. Round trips, plain ws://.
    const rtConns = await openMany(1000, port, () => host, () => token);
    const roundTrip = await roundTrips(rtConns);
    for (const ws of rtConns) ws.terminate();
    const floorRoundTrip = await floorRoundTrips(creds);

    // 2. Broadcast: one user holding 1,000 connections (4 receiver processes on the load core);
    // 8 concurrent sends naming that user; one second of warm-up, then 5 s measured.
    const RECEIVERS = 4;
    const receivers = await startReceivers(RECEIVERS, 1000 / RECEIVERS, `ws://127.0.0.1:${port}/ws`, { host, 'x-authorization': token });
    const api = new Pool(`http://127.0.0.1:${pier.ports!.local}`, { connections: 8 });
    const body = JSON.stringify({ users: ['alice'], payload: { event: 'news', data: 'x'.repeat(64) } });
    const headers = { 'x-app-key': creds.OS_APP_KEY, 'x-app-secret': creds.OS_APP_SECRET };
    const sender = postLoop(api, '/runtime/ws/conn/send', headers, body);
    const sendFor = sender.drive;
    const { rate: pierRate, utilisation: pier5 } = await broadcastRate(receivers, sendFor);
    await api.close();
    receivers.stop();

    // Bare uWS: the same 1,000 connections (the same receiver processes) subscribed to one topic,
    // published to in a loop from a connection that does not subscribe.
    const bare = await startChild('./bare-publish.js', [], SERVER_NODE_FLAGS);
    children.push(bare.proc);
    const bareReceivers = await startReceivers(RECEIVERS, 1000 / RECEIVERS, `ws://127.0.0.1:${bare.port}/ws`, {});
    const trigger = await new Promise<WebSocket>((res) => {
      const ws = new WebSocket(`ws://127.0.0.1:${bare.port}/go`, { perMessageDeflate: false });
      ws.once('open', () => res(ws));
    });
    const publishFor = async (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end) {
        trigger.send(JSON.stringify({ count: 50, payload: JSON.stringify({ event: 'news', data: 'x'.repeat(64) }) }));
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const { rate: bareRate, utilisation: bareRun } = await broadcastRate(bareReceivers, publishFor);
    trigger.terminate();
    bareReceivers.stop();
    // Nothing of a finished phase may keep the server core busy: the bare server may still hold a
    // backlog of frames it is flushing to receivers that are going away.
    await stopChild(bare.proc);

    // 3. Memory per idle connection: RSS of the Pier process before and after 10,000 connections.
    await new Promise((r) => setTimeout(r, 1000));
    const before = rssKiB(pier.proc.pid!);
    const idle = await openMany(10_000, port, () => host, () => token);
    await new Promise((r) => setTimeout(r, 2000));
    const after = rssKiB(pier.proc.pid!);
    for (const ws of idle) ws.terminate();

    // 4. The same round trips over wss:// (TLS terminated by the edge), on a second Pier with a
    // certificate of a CA made here: the cost of TLS, next to the plain figure above.
    const tlsDir = join(dir, 'tls');
    mkdirSync(tlsDir, { recursive: true });
    const ca = makeCa(tlsDir);
    const leaf = makeLeaf(tlsDir, ca, 'edge', ['*.alice.localhost']);
    await pier.stop();
    for (const c of children.splice(0)) await stopChild(c); // the plain Pier's app
    const secure = await pierWithApp(join(dir, 'tls'), { PIER_TLS_CERT: leaf.cert, PIER_TLS_KEY: leaf.key }, children);
    let roundTripTls;
    try {
      const tlsConns = await openMany(1000, secure.pier.ports!.public!, () => host, () => secure.token, readFileSync(ca.cert));
      roundTripTls = await roundTrips(tlsConns);
      for (const ws of tlsConns) ws.terminate();
    } finally {
      await secure.pier.stop();
    }

    // 5. What gateway history costs: round trips by user, one send's cost, broadcast, with history
    // on and off (ws-history.ts), in the one-process shape, against a floor that keeps, and on JetStream.
    const history = await benchWsHistory().catch((err: unknown) => {
      process.stderr.write(`bench ws history failed: ${(err as Error).stack ?? String(err)}\n`);
      return { error: String((err as Error).message ?? err) };
    });

    return {
      shape: 'npm start (one process, in-process bus, callback actor inside); the app in its own process; clients in this process',
      server_node_flags: SERVER_NODE_FLAGS,
      round_trip_1000_conns_1_msg_per_s: roundTrip,
      floor_round_trip_1000_conns_1_msg_per_s: { ...floorRoundTrip, note: 'uWS WebSocket in, a signed POST to the same app, its send over HTTP, the frame out: no bus, no actors (floor-ws.ts)' },
      goals: [ratioAtMost('ws round trip p99 vs floor (ms, 1,000 conns x 1 msg/s)', roundTrip.p99_ms, floorRoundTrip.p99_ms, 1.5, 5)],
      round_trip_wss_1000_conns_1_msg_per_s: { ...roundTripTls, p50_added_by_tls_ms: round(roundTripTls.p50_ms - roundTrip.p50_ms, 3), p99_added_by_tls_ms: round(roundTripTls.p99_ms - roundTrip.p99_ms, 3) },
      broadcast: {
        pier_messages_per_s: Math.round(pierRate),
        bare_uws_publish_messages_per_s: Math.round(bareRate),
        ratio: round(pierRate / bareRate, 2),
        goal_ratio: 0.5,
        history: 'on: the default since 0.3, so each send to alice is kept before it goes out (history.one_process has it on and off)',
        client_event_loop_utilisation: { pier: pier5.loadgen_event_loop_utilisation, bare: bareRun.loadgen_event_loop_utilisation },
        receiver_processes: RECEIVERS,
        send_errors: sender.errors(),
        note: 'Pier: 8 concurrent send calls naming one user who holds 1,000 connections; bare: one topic, 1,000 subscribers, 50 publishes per 10 ms; receivers in 4 processes on the load core; 1 s warm-up not counted',
      },
      idle_memory: { connections: idle.length, rss_delta_kib: after - before, per_connection_kib: round((after - before) / idle.length, 2), goal_kib: 8 },
      history,
    };
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await pier.stop();
    cleanup(dir);
  }
}
