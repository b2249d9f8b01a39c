import { request } from 'node:http';
import { verifySignature, WsApp, wsManifest } from '../../test/helpers/ws-app.js';
import { checkWs } from '../checks/ws.js';
import type { Rng } from '../random.js';
import type { Checker, Workload, WorkloadContext } from '../workload.js';
import { WsClient, type Endpoint } from '../ws-client.js';

/**
 * The WebSocket gateway under faults: a bounded crowd of browser clients (6–12 at a time) connect
 * through haproxy's public front, send numbered messages, close, and are replaced; a client whose
 * connection breaks is replaced by a new one. A real HTTP app takes the callbacks (failing a few
 * with 500, so retries happen) and every callback it accepts goes into the history. The checker
 * (checks/ws.ts) holds those callbacks against what the clients did.
 */

const USER = 'wschaos';
const APP = 'wsapp';
/** The app answers 500 to this share of callbacks: Pier retries them. */
const APP_FAILURE_RATE = 0.03;
/** Per connection: messages, and the gap between two (ms). */
const MESSAGES = [1, 40] as const;
const GAP_MS = [10, 300] as const;
/** After a refused or failed connect, the wait before the next (ms). */
const RETRY_MS = [200, 1_000] as const;
/** Settle: the wait for every open connection's close beyond peer death; then up to the contract's 60 s. */
const SETTLE_SLACK_MS = 15_000;
const SETTLE_BOUND_MS = 60_000;
const MAX_SESSIONS_PER_SLOT = 100_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface State {
  app: WsApp;
  to: Endpoint;
  secret: string;
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

/** Writes the callbacks the app accepted since last time, in arrival order, and names new edges. */
function record(ctx: WorkloadContext, s: State): void {
  while (s.recorded < s.app.accepted.length) {
    const c = s.app.accepted[s.recorded++];
    ctx.history.info('ws', 'callback', {
      conn_id: c.body.conn_id,
      action: c.body.action,
      data: c.body.data,
      event_id: c.headers['x-pier-event-id'],
      seq: Number(c.headers['x-pier-seq']),
      sig_ok: verifySignature(c, s.secret),
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
    for (let attempt = 1; attempt <= 5; attempt++) {
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

/** One slot of the crowd: a client after another until the deadline. */
async function slot(ctx: WorkloadContext, s: State, index: number, rng: Rng): Promise<void> {
  let previous: string | undefined;
  for (let i = 0; i < MAX_SESSIONS_PER_SLOT && Date.now() < ctx.deadline; i++) {
    const client = new WsClient(`c${++s.clients}`, ctx.history);
    if (!(await client.connect(s.to, { slot: index, ...(previous ? { after: previous } : {}) }))) {
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
  }
}

export const workload: Workload = {
  name: 'ws',

  async setup(ctx) {
    const rng = ctx.rng.fork('app');
    const app = await WsApp.start({ fail: () => rng.chance(APP_FAILURE_RATE) });
    const { token } = await admin(ctx, 'POST', '/admin/v1/users', { name: USER });
    const installed = await admin(ctx, 'POST', '/admin/v1/apps', { user: USER, manifest: wsManifest(APP, app.port), host: '127.0.0.1' });
    const s: State = {
      app,
      to: { port: ctx.cluster.front.public, host: `${APP}.${USER}.localhost`, token },
      secret: installed.env.OS_APP_SECRET,
      recorded: 0,
      recorder: null,
      named: new Set(),
      naming: new Set(),
      live: new Set(),
      clients: 0,
    };
    state = s;
    // Both edges know the app: four answers in a row on fresh connections (haproxy alternates).
    const headers = { 'x-app-key': installed.env.OS_APP_KEY, 'x-app-secret': installed.env.OS_APP_SECRET };
    let inRow = 0;
    for (let i = 0; i < 200 && inRow < 4; i++) {
      inRow = (await freshGet(`${ctx.cluster.url('local')}/runtime/ws/conn/list`, headers)) === 200 ? inRow + 1 : 0;
      if (inRow < 4) await sleep(100);
    }
    if (inRow < 4) throw new Error('ws: the edges did not learn the app within 20 s');
    s.recorder = setInterval(() => record(ctx, s), 20);
    ctx.log(`app ${APP} of ${USER} installed, callbacks on 127.0.0.1:${app.port}`);
  },

  async run(ctx) {
    const s = state!;
    const slots = ctx.rng.int(6, 12);
    ctx.log(`${slots} clients at a time`);
    await Promise.all(Array.from({ length: slots }, (_, i) => slot(ctx, s, i, ctx.rng.fork(`slot-${i}`))));
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

export const check: Checker = (lines) => checkWs(lines);
