import type { HistoryLine } from '../history.js';

/** peerDeadMs when the run start line does not say (Pier's default). */
const DEFAULT_PEER_DEAD_MS = 10_000;

/** The WebSocket workload's history, read into connections, clients and fault windows (what `checkWs` judges). */
export interface Arrival {
  t: number;
  n: number;
  action: string;
  eventId: string;
  body: string;
  sigOk: boolean;
  /** The chaos message's client and seq, for a message. */
  client?: string;
  cseq?: number;
  /** A close's `data` (docs/gateway.md): how many events it follows, or that its edge was lost. */
  closeEvents?: number;
  edgeLost?: boolean;
}

export interface Conn {
  connId: string;
  /** Every accepted callback, in arrival order. */
  all: Arrival[];
  /** First arrival of each event id, in arrival order: the app's view after deduplication. */
  events: Arrival[];
  redelivered: Arrival[];
  clients: Set<string>;
}

export interface Client {
  client: string;
  /** The connect invocation and its outcome. */
  invokedAt: number;
  outcome?: 'ok' | 'fail' | 'unknown';
  openedAt?: number;
  sent: number[];
  sendErrors: Set<number>;
  /** When the client saw its connection end (its close answered, timed out, or a break). */
  endedAt?: number;
  /** The code of its close (answered) or of the break. */
  endCode?: number;
  /** When its connection was closed under it (a `break`), if it was. */
  brokenAt?: number;
}

/** A window during which an edge process may lose a connection's unsettled events. */
export interface LossWindow {
  target: string;
  from: number;
  to: number;
  what: string;
}

export interface Parsed {
  peerDeadMs: number;
  conns: Map<string, Conn>;
  clients: Map<string, Client>;
  edgeOf: Map<string, string>;
  lossWindows: LossWindow[];
  /** NATS node restarts (and the death bound after each): when an edge may lose itself without a fault of its own. */
  natsWindows: LossWindow[];
  /** Each edge's deaths (kill -9 or drain): when its `down` line was written. */
  downs: Array<{ target: string; kind: string; t: number; startedAt: number }>;
  endOfHistory: number;
  /** Power cuts (every node off at once): from the cut to every node back. */
  powerCuts: Array<{ from: number; to: number }>;
}

/**
 * A fault line. The injector's `down` and `healed` lines carry a field `kind` (the fault's) that
 * overwrites the line's own `kind: 'fault'`, so they are told by their op and target too.
 */
const FAULT_KINDS = ['fault', 'kill -9', 'drain', 'pause', 'nats restart'];
/** A rolling upgrade's step (chaos/rolling.ts) stops its process as a drain does: read as one. */
const isUpgradeStop = (l: HistoryLine) => l.kind === 'upgrade' && (l.op === 'drain' || l.op === 'down') && typeof l.target === 'string';
const isFault = (l: HistoryLine) => l.kind === 'fault' || isUpgradeStop(l) || (FAULT_KINDS.includes(l.kind) && (l.op === 'down' || l.op === 'healed') && typeof l.target === 'string');

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function parse(lines: readonly HistoryLine[]): Parsed {
  const start = lines.find((l) => l.kind === 'run' && l.op === 'start');
  const out: Parsed = {
    peerDeadMs: num(start?.peerDeadMs) ?? DEFAULT_PEER_DEAD_MS,
    conns: new Map(),
    clients: new Map(),
    edgeOf: new Map(),
    lossWindows: [],
    natsWindows: [],
    downs: [],
    endOfHistory: lines.length > 0 ? lines[lines.length - 1].t : 0,
    powerCuts: [],
  };
  const openFaults = new Map<string, HistoryLine>();
  for (const l of lines) {
    if (isFault(l)) {
      const target = str(l.target) ?? '';
      if (l.op === 'kill -9' || l.op === 'drain' || l.op === 'pause') openFaults.set(target, l);
      if (l.op === 'power cut') out.powerCuts.push({ from: l.t, to: out.endOfHistory });
      if (l.op === 'power on' && out.powerCuts.length > 0) out.powerCuts[out.powerCuts.length - 1].to = l.t;
      if (l.op === 'pause') out.lossWindows.push({ target, from: l.t, to: l.t + (num(l.downMs) ?? 0), what: `pause of ${target} at n=${l.n}` });
      // An edge on that node reconnects elsewhere: it may not hear itself for the death bound, and fence itself (4003).
      if (l.op === 'nats restart') out.natsWindows.push({ target, from: l.t, to: l.t + (num(l.downMs) ?? 0) + out.peerDeadMs, what: `restart of ${target} at n=${l.n}` });
      if (l.op === 'down') {
        const began = openFaults.get(target);
        const kind = began?.op ?? '';
        out.downs.push({ target, kind, t: l.t, startedAt: began?.t ?? l.t });
        // A kill -9 loses what the edge had not settled. A drain delivers everything that reached
        // the edge before it sent its close (1001); a frame the browser sent while that close was
        // on its way may be dropped (no WebSocket frame is acknowledged: docs/gateway.md). Either
        // way a tail only: a gap is still an anomaly.
        if (kind === 'kill -9' || kind === 'drain') out.lossWindows.push({ target, from: began?.t ?? l.t, to: l.t, what: `${kind} of ${target} at n=${began?.n ?? l.n}` });
      }
      continue;
    }
    if (l.kind !== 'ws') continue;
    const client = str(l.client);
    if (l.op === 'callback' && l.phase === 'info') {
      const connId = str(l.conn_id) ?? '';
      let c = out.conns.get(connId);
      if (!c) out.conns.set(connId, (c = { connId, all: [], events: [], redelivered: [], clients: new Set() }));
      const data = l.data as { event?: unknown; data?: { client?: unknown; seq?: unknown } } | undefined;
      const a: Arrival = { t: l.t, n: l.n, action: str(l.action) ?? '', eventId: str(l.event_id) ?? `n${l.n}`, body: JSON.stringify([l.action, l.data]), sigOk: l.sig_ok === true };
      const closing = l.data as { events?: unknown; edgeLost?: unknown } | undefined;
      if (a.action === 'close') {
        a.closeEvents = num(closing?.events);
        a.edgeLost = closing?.edgeLost === true;
      }
      if (a.action === 'message' && data?.event === 'chaos') {
        a.client = str(data.data?.client);
        a.cseq = num(data.data?.seq);
        if (a.client !== undefined) c.clients.add(a.client);
      }
      c.all.push(a);
      if (c.events.some((e) => e.eventId === a.eventId)) c.redelivered.push(a);
      else c.events.push(a);
    } else if (l.op === 'edge' && l.phase === 'info') {
      const bus = str(l.bus_id);
      const target = str(l.target);
      if (bus && target) out.edgeOf.set(bus, target);
    } else if (client !== undefined) {
      let c = out.clients.get(client);
      if (!c) out.clients.set(client, (c = { client, invokedAt: l.t, sent: [], sendErrors: new Set() }));
      if (l.op === 'connect') {
        if (l.phase === 'invoke') c.invokedAt = l.t;
        else if (l.phase === 'ok' || l.phase === 'fail' || l.phase === 'unknown') {
          c.outcome = l.phase;
          if (l.phase === 'ok') c.openedAt = l.t;
        }
      } else if (l.op === 'send' && num(l.seq) !== undefined) c.sent.push(num(l.seq)!);
      else if (l.op === 'send error' && num(l.seq) !== undefined) c.sendErrors.add(num(l.seq)!);
      else if (l.op === 'close' && l.phase !== 'invoke') {
        c.endedAt = l.t;
        c.endCode = num(l.code);
      } else if (l.op === 'break') {
        c.brokenAt ??= l.t;
        c.endedAt ??= l.t;
        c.endCode ??= num(l.code);
      }
    }
  }
  return out;
}

