import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { cleanup, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { lineReader, rssKiB, startChild } from './children.js';
import { atLeast, atMost, ratioAtLeast } from './goals.js';
import { postLoop, round, summarise } from './load.js';
import { pinLoad, pinServer } from './pinning.js';

const GOAL_USERS = 100;
const PER_USER = 1_000;
const GOAL_TOTAL = GOAL_USERS * PER_USER;
const CLIENT_PROCESSES = 4;
/** 8 source addresses of ~28,000 ephemeral ports each: room for 100,000 with plenty to spare. */
const SOURCES = Array.from({ length: 8 }, (_, i) => `127.0.0.${i + 2}`);
const FDS = 200_000;
const OPEN_DEADLINE_MS = 300_000;

/** Lifts a process's open-file limit (`prlimit`; needs CAP_SYS_RESOURCE past the hard limit); false when refused. */
function allowFiles(pid: number): boolean {
  try {
    execFileSync('prlimit', ['--pid', String(pid), `--nofile=${FDS}:${FDS}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The open files a process may hold now (its soft limit, from /proc). */
function fileLimit(pid: number): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
  return Number(line?.split(/\s+/)[3] ?? 1024);
}

/**
 * How many users (of 1,000 connections) this machine lets one edge hold: 100 where the open-file
 * limit can be lifted to 200,000; otherwise as many as fit under the limit with 1,000 files to
 * spare (a container without CAP_SYS_RESOURCE keeps its hard limit). PIER_BENCH_C100K_USERS: fewer,
 * for a quick try of the bench itself.
 */
function usersHere(): { users: number; limitedBy: string | null } {
  const asked = Number(process.env.PIER_BENCH_C100K_USERS ?? GOAL_USERS);
  const lifted = allowFiles(process.pid);
  const limit = fileLimit(process.pid);
  const fit = Math.floor((limit - 1_000) / PER_USER);
  if (fit >= asked) return { users: asked, limitedBy: asked < GOAL_USERS ? 'PIER_BENCH_C100K_USERS' : null };
  return { users: fit, limitedBy: `open files: one process may hold ${limit} here${lifted ? '' : ' (prlimit could not lift it: no CAP_SYS_RESOURCE in this container)'}` };
}

interface ClientGroup {
  path: string;
  headers: Record<string, string>;
  count: number;
  watch: boolean;
}

/** The load-side processes (c100k-clients.ts), each with its groups; resolves once all are open. */
async function startClients(port: number, total: number, groupsOf: (p: number) => ClientGroup[]) {
  const script = fileURLToPath(new URL('./c100k-clients.js', import.meta.url));
  const procs: ChildProcess[] = [];
  const lines: Array<() => Promise<string>> = [];
  for (let p = 0; p < CLIENT_PROCESSES; p++) {
    const proc = spawn(process.execPath, ['--max-old-space-size=2048', script, JSON.stringify({ port, groups: groupsOf(p), sources: SOURCES })], { stdio: ['pipe', 'pipe', 'inherit'] });
    pinLoad(proc.pid);
    allowFiles(proc.pid!);
    procs.push(proc);
    lines.push(lineReader(proc));
  }
  const t0 = performance.now();
  const opened = await Promise.race([
    Promise.all(lines.map((next) => next())),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not all ${total} connections opened within ${OPEN_DEADLINE_MS / 1000} s`)), OPEN_DEADLINE_MS)),
  ]);
  const failed = opened.find((l) => !l.startsWith('open '));
  const ask = async (p: number, command: string) => {
    const answer = lines[p]!();
    procs[p]!.stdin!.write(`${command}\n`);
    return answer;
  };
  return {
    failed,
    seconds: round((performance.now() - t0) / 1000, 1),
    count: async () => Number(await ask(0, 'count')),
    ping: async (n: number, spreadMs = 0) => {
      const answers = (await Promise.all(procs.map((_, p) => ask(p, `ping ${n} ${spreadMs}`)))).map((l) => JSON.parse(l) as { latencies: number[]; lost: number });
      return { latencies: answers.flatMap((a) => a.latencies), lost: answers.reduce((sum, a) => sum + a.lost, 0) };
    },
    stop: () => {
      for (const p of procs) {
        p.stdin!.write('close\n');
        setTimeout(() => p.kill('SIGKILL'), 5_000).unref();
      }
    },
  };
}

/** Every user's connections spread over the client processes; user u0's (the broadcast's) in process 0, watched. */
function groups(p: number, users: number, path: (user: number) => string, headers: (user: number) => Record<string, string>): ClientGroup[] {
  const out: ClientGroup[] = [];
  for (let u = 0; u < users; u++) if (u % CLIENT_PROCESSES === p) out.push({ path: path(u), headers: headers(u), count: PER_USER, watch: u === 0 });
  return out;
}

/** Messages a second counted by process 0 while `drive` runs 5 s (after 1 s not counted). */
async function rate(count: () => Promise<number>, drive: (ms: number) => Promise<unknown>): Promise<number> {
  await drive(1_000);
  await new Promise((r) => setTimeout(r, 500));
  const from = await count();
  const t0 = performance.now();
  await drive(5_000);
  await new Promise((r) => setTimeout(r, 500));
  return ((await count()) - from) / ((performance.now() - t0) / 1000);
}

/** How long a paced round of pings takes: 1,000 a second. */
const PACED_MS = 1_000;

type Clients = Awaited<ReturnType<typeof startClients>>;

/** Five rounds of 1,000 pings (250 from each load process), all at once or spread over `spreadMs`. */
async function pingRounds(clients: Clients, spreadMs: number): Promise<ReturnType<typeof summarise>> {
  const pings: number[] = [];
  let lost = 0;
  for (let i = 0; i < 5; i++) {
    const round = await clients.ping(250, spreadMs);
    pings.push(...round.latencies);
    lost += round.lost;
    await new Promise((r) => setTimeout(r, 200));
  }
  return summarise(pings, lost);
}

const progress = (what: string) => process.stderr.write(`c100k: ${what}\n`);

async function eventLoopP99(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('nodejs_eventloop_lag_p99_seconds'));
  return Math.max(0, Number(line?.split(' ').at(-1)) * 1000 - 10); // prom-client's 10 ms sampling timer taken off
}

/**
 * Pier's RSS once V8 has collected the garbage of the opening burst. Right after it, RSS still holds
 * what 19,000 open callbacks allocated and dropped: V8 collects it only when its memory reducer
 * runs a full collection, some seconds after allocation stops (about 20 s here), and then gives the
 * pages back. Polls for RSS to fall by a third of what the opening added, for at most `maxMs`;
 * answers RSS then, how long it waited, and whether the fall came (if not, RSS as it is).
 */
async function rssOnceCollected(pid: number, before: number, peak: number, maxMs = 60_000): Promise<{ kib: number; waitedSeconds: number; collected: boolean }> {
  const t0 = performance.now();
  const target = peak - (peak - before) / 3;
  for (;;) {
    const kib = rssKiB(pid);
    const waitedSeconds = round((performance.now() - t0) / 1000, 1);
    if (kib <= target) {
      await new Promise((r) => setTimeout(r, 2_000)); // the rest of the pages it gives back
      return { kib: Math.min(kib, rssKiB(pid)), waitedSeconds, collected: true };
    }
    if (performance.now() - t0 >= maxMs) return { kib, waitedSeconds, collected: false };
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/**
 * `npm run bench -- c100k` (issue #26): 100,000 WebSockets on one edge (the `npm start` shape: the
 * callback actor in the same process), 100 users × 1,000 connections, each opened with its user's
 * token from 8 source addresses by 4 load-side processes. Time to open them all, RSS per
 * connection once the 100,000 open callbacks were delivered, pings answered while idle, a
 * broadcast to one user's 1,000 connections next to bare uWS with the same 100,000 open.
 */
export async function benchC100k(): Promise<Record<string, unknown>> {
  const { users: USERS, limitedBy } = usersHere();
  const TOTAL = USERS * PER_USER;
  if (USERS < 1) return { skipped: `${limitedBy}: not even ${PER_USER} connections fit` };
  const dir = tempDir('pier-c100k-');
  const app = await startChild('./c100k-app.js');
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_WS_CONNS_PER_USER: String(PER_USER * 2), PIER_WS_IDLE_MS: '3600000' }));
  pinServer(pier.proc.pid);
  allowFiles(pier.proc.pid!);
  let clients: Awaited<ReturnType<typeof startClients>> | null = null;
  try {
    const admin = new Pool(pier.adminUrl, { connections: 8 });
    const adminToken = readFileSync(join(dir, 'data', 'admin.token'), 'utf8').trim();
    const adminCall = async (path: string, body: unknown) => {
      const r = await admin.request({ path, method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const answer = (await r.body.json()) as { code: number; data: any; message: string };
      if (r.statusCode !== 200) throw new Error(`${path}: ${r.statusCode} ${answer.message}`);
      return answer.data;
    };
    const creds = { OS_APP_KEY: `ak_${randomBytes(12).toString('base64url')}`, OS_APP_SECRET: randomBytes(24).toString('base64url') };
    const tokens: string[] = [];
    for (let u = 0; u < USERS; u++) {
      tokens.push((await adminCall('/admin/v1/users', { name: `u${u}` })).token);
      await adminCall('/admin/v1/apps', { user: `u${u}`, manifest: `metadata: { name: chat }\noptions:\n  websocket: { url: /cb, port: ${app.port} }\n`, ...(u === 0 ? { credentials: creds } : {}) });
    }
    progress(`${USERS} users with their app installed; opening ${TOTAL} connections`);
    const port = pier.ports!.public!;
    const rssBefore = rssKiB(pier.proc.pid!);
    clients = await startClients(port, TOTAL, (p) => groups(p, USERS, () => '/ws', (u) => ({ Host: `chat.u${u}.localhost`, 'x-authorization': tokens[u]! })));
    if (clients.failed) throw new Error(`opening: ${clients.failed}`);
    const openSeconds = clients.seconds;
    progress(`open in ${openSeconds} s; waiting for the open callbacks`);
    // The storm of open callbacks (one per connection) delivered: then the edge is idle.
    const t0 = performance.now();
    let delivered = 0;
    while (performance.now() - t0 < OPEN_DEADLINE_MS) {
      delivered = Number(await (await fetch(`http://127.0.0.1:${app.port}/count`)).text());
      if (delivered >= TOTAL) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const settleSeconds = round((performance.now() - t0) / 1000, 1);
    progress(`${delivered} open callbacks delivered (${settleSeconds} s more); pings, then the broadcast`);
    await new Promise((r) => setTimeout(r, 2_000));
    const rssAfter = rssKiB(pier.proc.pid!);
    progress('waiting for the garbage of the opening burst to be collected');
    const settled = await rssOnceCollected(pier.proc.pid!, rssBefore, rssAfter);
    await eventLoopP99(pier.adminUrl); // resets the histogram: what follows is the idle edge
    await clients.ping(50); // warm-up
    const ping = await pingRounds(clients, 0);
    const pingPaced = await pingRounds(clients, PACED_MS);
    const idleLoopP99 = await eventLoopP99(pier.adminUrl);

    const api = new Pool(`http://127.0.0.1:${pier.ports!.local}`, { connections: 8 });
    const body = JSON.stringify({ users: ['u0'], payload: { event: 'news', data: 'x'.repeat(64) } });
    const headers = { 'x-app-key': creds.OS_APP_KEY, 'x-app-secret': creds.OS_APP_SECRET };
    const sender = postLoop(api, '/runtime/ws/conn/send', headers, body);
    const sendFor = sender.drive;
    const pierRate = await rate(clients.count, sendFor);
    await api.close();
    await admin.close();
    clients.stop();
    clients = null;
    await pier.stop();

    progress('bare uWS with the same connections');
    // Bare uWS with the same 100,000 open: u0's 1,000 subscribed to one topic, published to in a loop.
    const bare = await startChild('./bare-publish.js');
    allowFiles(bare.proc.pid!);
    let bareRate = 0;
    let barePing: ReturnType<typeof summarise> | null = null;
    let barePingPaced: ReturnType<typeof summarise> | null = null;
    let bareRss = { before_kib: rssKiB(bare.proc.pid!), after_kib: 0, per_connection_kib: 0 };
    try {
      clients = await startClients(bare.port, TOTAL, (p) => groups(p, USERS, (u) => (u === 0 ? '/ws' : '/idle'), () => ({ Host: 'bare' })));
      if (clients.failed) throw new Error(`opening (bare): ${clients.failed}`);
      await new Promise((r) => setTimeout(r, 2_000));
      const after = rssKiB(bare.proc.pid!);
      bareRss = { ...bareRss, after_kib: after, per_connection_kib: round((after - bareRss.before_kib) / TOTAL, 2) };
      // Before the broadcast, as Pier's: pongs read behind a broadcast's backlog time the backlog.
      await clients.ping(50); // warm-up
      barePing = await pingRounds(clients, 0);
      barePingPaced = await pingRounds(clients, PACED_MS);
      const trigger = await new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${bare.port}/go`, { perMessageDeflate: false });
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
      });
      const payload = JSON.stringify({ event: 'news', data: 'x'.repeat(64) });
      bareRate = await rate(clients.count, async (ms) => {
        const end = performance.now() + ms;
        while (performance.now() < end) {
          trigger.send(JSON.stringify({ count: 50, payload }));
          await new Promise((r) => setTimeout(r, 10));
        }
      });
      trigger.terminate();
    } finally {
      clients?.stop();
      clients = null;
      bare.stop();
    }
    const perConnKiB = round((rssAfter - rssBefore) / TOTAL, 2);
    const settledPerConnKiB = round((settled.kib - rssBefore) / TOTAL, 2);
    return {
      shape: 'npm start (one process: the edge with the callback actor inside); the app in its own process; 4 load-side processes of raw sockets from 8 source addresses',
      connections: TOTAL,
      users: USERS,
      goal_connections: GOAL_TOTAL,
      limited_by: limitedBy,
      open_all_seconds: openSeconds,
      open_callbacks_delivered: delivered,
      open_callbacks_settled_seconds_after: settleSeconds,
      rss: {
        before_kib: rssBefore,
        after_kib: rssAfter,
        per_connection_kib: perConnKiB,
        note: 'after_kib: 2 s after the open callbacks were delivered, with their garbage; settled: once V8 collected it (its memory reducer, some seconds after allocation stops)',
        settled: { after_kib: settled.kib, per_connection_kib: settledPerConnKiB, waited_s: settled.waitedSeconds, collected: settled.collected },
      },
      bare_uws_rss: { ...bareRss, note: 'the same connections held by a bare uWS server (1,000 subscribed to a topic): the runtime floor of a connection' },
      idle_ping: { ...ping, note: '1,000 pings a round at once (250 from each load process), 5 rounds, random connections; uWS answers with a pong. A burst times the load side too: see bare_uws_idle_ping' },
      idle_ping_paced: { ...pingPaced, note: `1,000 pings a round spread over ${PACED_MS} ms, 5 rounds, random connections: the edge\'s answer to pings at 1,000 a second` },
      bare_uws_idle_ping: { ...barePing, note: 'the burst above against a bare uWS server holding the same connections: the load side\'s share' },
      bare_uws_idle_ping_paced: { ...barePingPaced, note: 'the paced pings above against the bare uWS server' },
      edge_event_loop_delay_p99_ms: round(idleLoopP99),
      broadcast_one_user_1000_conns: { pier_messages_per_s: Math.round(pierRate), bare_uws_messages_per_s: Math.round(bareRate), send_errors: sender.errors() },
      goals: [
        atLeast('c100k connections held by one edge', TOTAL, GOAL_TOTAL),
        atMost('c100k RSS per connection, settled (KiB)', settledPerConnKiB, 8),
        // Paced: a burst's p99 is the load side's (a bare uWS server holding the same connections
        // gives the same figure; docs/performance.md "Many connections on one edge (c100k)").
        atMost('c100k idle ping p99 (ms, 1,000 pings a second)', pingPaced.p99_ms, 50),
        ratioAtLeast('c100k broadcast to one user vs bare uWS with 100,000 open', pierRate, bareRate, 0.5),
      ],
    };
  } finally {
    clients?.stop();
    await pier.stop();
    app.stop();
    cleanup(dir);
  }
}
