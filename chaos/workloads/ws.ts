import { request } from 'node:http';
import { verifySignature, WsApp, wsManifest } from '../../test/helpers/ws-app.js';
import { checkWs } from '../checks/ws.js';
import { checkWsRecovery } from '../checks/ws-recovery.js';
import type { Rng } from '../random.js';
import type { Checker, Workload, WorkloadContext } from '../workload.js';
import { WsClient, type Endpoint, type Position } from '../ws-client.js';

/**
 * The WebSocket gateway under faults: a bounded crowd of browser clients (6–12 at a time) connect
 * through haproxy's public front, send numbered messages, close, and are replaced; a client whose
 * connection breaks is replaced by a new one. A real HTTP app takes the callbacks (failing a few
 * with 500, so retries happen) and every callback it accepts goes into the history. The checker
 * (checks/ws.ts) holds those callbacks against what the clients did.
 *
 * Gateway history and recovery (docs/protocol.md "History and recovery"): the app is installed for
 * two users, and each slot of the crowd is one browser of one of them that asks for recovery as the
 * SDK does: `?recover=` first, then `?recover=<epoch>:<offset>` of the last message seen on each
 * reconnect (now and then a fresh page starts over). Meanwhile the app broadcasts to each user
 * (`send {users: [user]}`, two senders per user on fresh connections, so through both edges),
 * recording each send's answer (`broadcast`: offset, epoch, kept); the clients record every frame
 * (ws-client.ts). The checker (checks/ws-recovery.ts) holds the frames against the acknowledged sends.
 */

const USERS = ['wschaos', 'wschaos2'] as const;
const APP = 'wsapp';
/** The app answers 500 to this share of callbacks: Pier retries them. */
const APP_FAILURE_RATE = 0.03;
/** Per connection: messages, and the gap between two (ms). */
const MESSAGES = [1, 40] as const;
const GAP_MS = [10, 300] as const;
/** After a refused or failed connect, the wait before the next (ms). */
const RETRY_MS = [200, 1_000] as const;
/** A reconnect that is a fresh page (no position: it starts over) rather than the same page coming back. */
const FRESH_PAGE_RATE = 0.1;
/**
 * Broadcasts: senders per user and the gap between one's sends (ms). About 3 a second per user: the
 * history's 100 messages per user span some 30 s, so a client back within a few seconds is inside it.
 */
const SENDERS = 2;
const BROADCAST_GAP_MS = [200, 1_000] as const;
/** A send not answered in this long is of unknown outcome (it may be kept and delivered). */
const SEND_TIMEOUT_MS = 15_000;
/** Settle: the wait for every open connection's close beyond peer death; then up to the contract's 60 s. */
const SETTLE_SLACK_MS = 15_000;
const SETTLE_BOUND_MS = 60_000;
const MAX_SESSIONS_PER_SLOT = 100_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One user's install of the app. */
interface Install {
  user: string;
  to: Endpoint;
  key: string;
  secret: string;
}

interface State {
  app: WsApp;
  installs: Install[];
  /** Callbacks already written to the history (an index into app.accepted). */
  recorded: number;
  recorder: NodeJS.Timeout | null;
  /** Edge bus ids already named in the history, and those being looked up. */
  named: Set<string>;
  naming: Set<string>;
  live: Set<WsClient>;
  clients: number;
}

let state: State | null = null;

async function admin(ctx: WorkloadContext, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${ctx.cluster.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ctx.cluster.secrets.PIER_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const json = await res.json();
  if (!res.ok || json.code !== 0) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
  return json.data;
}

/** A GET on a fresh TCP connection (haproxy balances connections, not requests): its status. */
function freshGet(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false, headers, timeout: 3_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(0));
    req.end();
  });
}

/**
 * A POST on a fresh TCP connection (so haproxy spreads them over the edges): its status and JSON
 * answer, or the error when no answer came (timeout, connection broken).
 */
function freshPost(url: string, headers: Record<string, string>, body: unknown): Promise<{ status: number; json: any } | { error: string }> {
  return new Promise((resolve) => {
    const text = JSON.stringify(body);
    const req = request(url, { method: 'POST', agent: false, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }, timeout: SEND_TIMEOUT_MS }, (res) => {
      let raw = '';
      res.on('data', (d: Buffer) => (raw += d.toString()));
      res.on('end', () => {
        let json: any = null;
        try {
          json = JSON.parse(raw);
        } catch {
          json = { raw: raw.slice(0, 300) };
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
      res.on('error', (err) => resolve({ error: `answer broken: ${err.message}` }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${SEND_TIMEOUT_MS} ms`)));
    req.on('error', (err) => resolve({ error: err.message }));
    req.end(text);
  });
}

/**
 * One broadcast to a user, recorded: `broadcast` invoke `{user, pid}`; then ok `{delivered, kept,
 * offset, epoch}`, fail (a 4xx: nothing kept or sent) or unknown (a 5xx or no answer: it may have
 * been kept and delivered). The payload names its user and its id: `{chaos: 'broadcast', user, id}`.
 */
async function broadcast(ctx: WorkloadContext, i: Install, pid: string): Promise<{ kept: boolean | undefined } | null> {
  const op = ctx.history.invoke('ws', 'broadcast', { user: i.user, pid });
  const res = await freshPost(`${ctx.cluster.url('local')}/runtime/ws/conn/send`, { 'x-app-key': i.key, 'x-app-secret': i.secret }, { users: [i.user], payload: { chaos: 'broadcast', user: i.user, id: pid } });
  if ('error' in res) {
    ctx.history.unknown('ws', 'broadcast', op, { user: i.user, pid, error: res.error });
    return null;
  }
  if (res.status === 200 && res.json?.code === 0) {
    const d = res.json.data ?? {};
    ctx.history.ok('ws', 'broadcast', op, { user: i.user, pid, delivered: d.delivered, kept: d.kept, ...(d.offset === undefined ? {} : { offset: d.offset }), ...(d.epoch === undefined ? {} : { epoch: d.epoch }) });
    return { kept: typeof d.kept === 'boolean' ? d.kept : undefined };
  }
  const error = JSON.stringify(res.json).slice(0, 300);
  if (res.status >= 400 && res.status < 500) ctx.history.fail('ws', 'broadcast', op, { user: i.user, pid, status: res.status, error });
  else ctx.history.unknown('ws', 'broadcast', op, { user: i.user, pid, status: res.status, error });
  return null;
}

/** One sender of the app (an app replica): broadcasts to its user until the deadline. */
async function sender(ctx: WorkloadContext, i: Install, name: string, rng: Rng): Promise<void> {
  for (let n = 1; Date.now() < ctx.deadline; n++) {
    await sleep(rng.int(...BROADCAST_GAP_MS));
    if (Date.now() >= ctx.deadline) break;
    await broadcast(ctx, i, `${i.user}:${name}:${n}`);
  }
}

/** Writes the callbacks the app accepted since last time, in arrival order, and names new edges. */
function record(ctx: WorkloadContext, s: State): void {
  while (s.recorded < s.app.accepted.length) {
    const c = s.app.accepted[s.recorded++];
    const install = s.installs.find((i) => i.user === c.body.user_name);
    ctx.history.info('ws', 'callback', {
      conn_id: c.body.conn_id,
      action: c.body.action,
      data: c.body.data,
      event_id: c.headers['x-pier-event-id'],
      seq: Number(c.headers['x-pier-seq']),
      sig_ok: install !== undefined && verifySignature(c, install.secret),
    });
    const bus = String(c.body.conn_id).split('.')[0];
    if (!s.named.has(bus) && !s.naming.has(bus)) void nameEdge(ctx, s, bus);
  }
}

/**
 * Which edge process (by its fault target name) a conn id's bus id belongs to, from the admin
 * status (bus id → pid) and the cluster's processes (pid → name): the checker times a killed
 * edge's closes with it.
 */
async function nameEdge(ctx: WorkloadContext, s: State, bus: string): Promise<void> {
  s.naming.add(bus);
  try {
    // Said by the edge's own start (an edge killed before the admin's status is asked, a power
    // cut's say, is named all the same); a release before it says nothing: then the admin is asked.
    // Looked at on every attempt: an edge's first connections can come before its "pier ready"
    // line (its listeners take them while the line is being written), and the edge may be gone,
    // out of the admin's status, by the next attempt.
    for (let attempt = 1; attempt <= 5; attempt++) {
      const started = ctx.cluster.edges().find((e) => e.busIds.has(bus));
      if (started) {
        ctx.history.info('ws', 'edge', { bus_id: bus, target: started.name, pid: started.pid });
        s.named.add(bus);
        return;
      }
      try {
        const status = await admin(ctx, 'GET', '/admin/v1/status');
        const replica = (status.replicas as Array<{ busId?: string; pid?: number }>).find((r) => r.busId === bus);
        const proc = replica && ctx.cluster.edges().find((e) => e.pid === replica.pid);
        if (proc) {
          ctx.history.info('ws', 'edge', { bus_id: bus, target: proc.name, pid: replica.pid });
          s.named.add(bus);
          return;
        }
      } catch {
        // The admin process may be the one down: asked again.
      }
      await sleep(1_000);
    }
    ctx.history.info('ws', 'edge unknown', { bus_id: bus });
  } finally {
    s.naming.delete(bus);
  }
}

/**
 * One slot of the crowd: a browser of one user, a client (connection) after another until the
 * deadline, each asking to recover from where the one before ended (a fresh page now and then).
 */
async function slot(ctx: WorkloadContext, s: State, index: number, rng: Rng): Promise<void> {
  const install = s.installs[index % s.installs.length];
  let previous: string | undefined;
  let position: Position | null = null;
  for (let i = 0; i < MAX_SESSIONS_PER_SLOT && Date.now() < ctx.deadline; i++) {
    if (i > 0 && rng.chance(FRESH_PAGE_RATE)) position = null;
    const client: WsClient = new WsClient(`c${++s.clients}`, ctx.history, { from: position });
    const opened = await client.connect(install.to, { slot: index, user: install.user, ...(previous ? { after: previous } : {}) });
    position = client.position;
    if (!opened) {
      await sleep(rng.int(...RETRY_MS));
      continue;
    }
    previous = client.id;
    s.live.add(client);
    const count = rng.int(...MESSAGES);
    for (let m = 0; m < count && client.live && Date.now() < ctx.deadline; m++) {
      client.send();
      await sleep(rng.int(...GAP_MS));
    }
    // At the deadline the client stays open: settle closes it.
    if (Date.now() >= ctx.deadline && client.live) return;
    if (client.live) await client.close();
    s.live.delete(client);
    // What arrived until its end is where the next asks from.
    position = client.position;
  }
}

export const workload: Workload = {
  name: 'ws',

  async setup(ctx) {
    const rng = ctx.rng.fork('app');
    const app = await WsApp.start({ fail: () => rng.chance(APP_FAILURE_RATE) });
    const installs: Install[] = [];
    for (const user of USERS) {
      const { token } = await admin(ctx, 'POST', '/admin/v1/users', { name: user });
      const installed = await admin(ctx, 'POST', '/admin/v1/apps', { user, manifest: wsManifest(APP, app.port), host: '127.0.0.1' });
      installs.push({ user, to: { port: ctx.cluster.front.public, host: `${APP}.${user}.localhost`, token }, key: installed.env.OS_APP_KEY, secret: installed.env.OS_APP_SECRET });
    }
    const s: State = { app, installs, recorded: 0, recorder: null, named: new Set(), naming: new Set(), live: new Set(), clients: 0 };
    state = s;
    for (const i of installs) {
      // Both edges know the app: four answers in a row on fresh connections (haproxy alternates).
      const headers = { 'x-app-key': i.key, 'x-app-secret': i.secret };
      let inRow = 0;
      for (let n = 0; n < 200 && inRow < 4; n++) {
        inRow = (await freshGet(`${ctx.cluster.url('local')}/runtime/ws/conn/list`, headers)) === 200 ? inRow + 1 : 0;
        if (inRow < 4) await sleep(100);
      }
      if (inRow < 4) throw new Error(`ws: the edges did not learn ${i.user}'s app within 20 s`);
      // And both keep what is sent to the user: four sends in a row kept (recorded as broadcasts). A
      // build without gateway history (0.2, the old side of an upgrade) answers no `kept` at all.
      inRow = 0;
      for (let n = 1; n <= 100 && inRow < 4; n++) {
        const answer = await broadcast(ctx, i, `${i.user}:warm-up:${n}`);
        inRow = answer && answer.kept !== false ? inRow + 1 : 0;
        if (inRow < 4) await sleep(200);
      }
      if (inRow < 4) throw new Error(`ws: the edges do not keep what ${i.user}'s app sends (gateway history off? see the edges' logs)`);
    }
    s.recorder = setInterval(() => record(ctx, s), 20);
    ctx.log(`app ${APP} of ${USERS.join(' and ')} installed, callbacks on 127.0.0.1:${app.port}`);
  },

  async run(ctx) {
    const s = state!;
    const slots = ctx.rng.int(6, 12);
    ctx.log(`${slots} clients at a time`);
    await Promise.all([
      ...Array.from({ length: slots }, (_, i) => slot(ctx, s, i, ctx.rng.fork(`slot-${i}`))),
      ...s.installs.flatMap((i) => Array.from({ length: SENDERS }, (_, k) => sender(ctx, i, `s${k + 1}`, ctx.rng.fork(`sender-${i.user}-${k + 1}`)))),
    ]);
  },

  async settle(ctx) {
    const s = state!;
    try {
      await Promise.all([...s.live].map((c) => c.close()));
      for (const c of s.live) c.terminate();
      s.live.clear();
      const start = ctx.history.lines.find((l) => l.kind === 'run' && l.op === 'start');
      const peerDeadMs = typeof start?.peerDeadMs === 'number' ? start.peerDeadMs : 10_000;
      const began = Date.now();
      const unclosed = () => {
        record(ctx, s);
        const seen = new Set(s.app.accepted.map((c) => c.body.conn_id));
        for (const c of s.app.accepted) if (c.body.action === 'close') seen.delete(c.body.conn_id);
        return [...seen];
      };
      let waiting = unclosed();
      // Every connection the app saw open gets its close: waited for past peer death, then (when
      // some is still missing) up to the contract's 60 s, so a late close is told from none.
      while (waiting.length > 0 && Date.now() - began < peerDeadMs + SETTLE_SLACK_MS) {
        await sleep(100);
        waiting = unclosed();
      }
      if (waiting.length > 0) {
        ctx.history.info('ws', 'settle late', { unclosed: waiting, waitedMs: Date.now() - began });
        while (waiting.length > 0 && Date.now() - began < SETTLE_BOUND_MS) {
          await sleep(250);
          waiting = unclosed();
        }
      }
      // Redeliveries still in flight have a moment to show.
      await sleep(500);
      record(ctx, s);
      ctx.history.info('ws', 'settled', { unclosed: waiting, waitedMs: Date.now() - began, callbacks: s.app.accepted.length, refused: s.app.refused });
      while (s.naming.size > 0 && Date.now() - began < SETTLE_BOUND_MS + 10_000) await sleep(100);
    } finally {
      if (s.recorder) clearInterval(s.recorder);
      await s.app.stop();
      state = null;
    }
  },
};

export const check: Checker = (lines) => [...checkWs(lines), ...checkWsRecovery(lines)];
