import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';
import { parse, type Arrival, type Client, type Conn, type LossWindow, type Parsed } from './ws-history.js';
import { checkWsUpgrade, hasUpgrade } from './ws-upgrade.js';

/**
 * The gateway's delivery contract (docs/protocol.md "Callbacks to the app", docs/gateway.md "The
 * exact loss window"), checked from the history alone. What the workload records (kind `ws`):
 *
 * - `connect` invoke/ok/fail/unknown `{client}`: one client = one connection attempt; a reconnect
 *   is a new client.
 * - `send` info `{client, seq}` before each frame `{"event":"chaos","data":{client, seq}}`, seq from
 *   1 in send order; `send error` info when the socket refused to write it.
 * - `close` invoke/ok/unknown `{client, code}` (the client closed it), `break` info `{client, code}`
 *   (it was closed under the client).
 * - `callback` info `{conn_id, action, data, event_id, seq, sig_ok}`: a callback the app accepted
 *   (2xx), in arrival order.
 * - `edge` info `{bus_id, target}`: the edge process (fault target name) whose bus id prefixes
 *   conn ids.
 *
 * At-least-once is the contract: an event delivered again with the same X-Pier-Event-Id is a
 * redelivery the app drops, not a duplicate. The order, duplicate and close checks read each
 * connection's callbacks with redeliveries removed (what an app deduplicating by event id sees).
 */

/** A killed edge's connection gets its close within peerDeadMs plus this. */
export const CLOSE_SLACK_MS = 10_000;

/**
 * How long after its client ended an edge may still hold a connection's unsettled events and its
 * close: the callback retry period (docs/gateway.md). An edge lost within it loses them.
 */
export const HELD_AFTER_END_MS = 60_000;

const edgeOfConn = (p: Parsed, connId: string) => p.edgeOf.get(connId.slice(0, connId.indexOf('.')));
const short = (connId: string) => (connId.length > 20 ? `${connId.slice(0, 20)}…` : connId);

/** The connection whose messages carry this client's id (one client is one connection). */
function connsByClient(p: Parsed): Map<string, Conn[]> {
  const by = new Map<string, Conn[]>();
  for (const c of p.conns.values()) for (const client of c.clients) by.set(client, [...(by.get(client) ?? []), c]);
  return by;
}

/**
 * Whether the client's unsettled events may have been lost: its connection's edge (any edge when
 * the app never named the connection) was killed -9 or paused while the connection lived.
 */
/** Pier's close code for a connection its edge gave up because the cluster may have taken it for dead (docs/protocol.md "Gateway"). */
const LOST = 4003;

/** A close the edge sends (docs/gateway.md): 1001, 1009, 1011 and Pier's 4000-4099. Not 1006 (no close frame: the connection broke). */
const endedByEdge = (code: number) => code === 1001 || code === 1009 || code === 1011 || (code >= 4000 && code <= 4099);

function lossExcuse(p: Parsed, client: Client, conn: Conn | undefined): LossWindow | undefined {
  const from = client.invokedAt;
  const closeAt = conn?.events.find((e) => e.action === 'close')?.t;
  // No close came (only a power cut may excuse that: checked apart): its edge held the events up to the retry period after the end.
  const to = closeAt ?? (client.endedAt !== undefined ? client.endedAt + HELD_AFTER_END_MS : p.endOfHistory);
  const target = conn ? edgeOfConn(p, conn.connId) : undefined;
  const overlaps = (w: LossWindow, end: number) => w.from <= end && w.to >= from;
  const edgeFault = p.lossWindows.find((w) => (target === undefined || w.target === target) && w.target.startsWith('edge') && overlaps(w, to));
  if (edgeFault) return edgeFault;
  // The edge ended the connection under the client (4003 fenced, 4005 to recover, 4009, ...): what
  // the browser sent while that close was on its way is not delivered (WebSocket frames are not
  // acknowledged; docs/gateway.md), and the browser was told. A 4003 needs a cause in the run (a NATS
  // node restarted under its edge): a live edge fencing itself for no fault is a finding. A tail lost
  // behind the client's own close (1000) on a live edge is what this check is for; a gap is an
  // anomaly either way (checked before).
  const code = client.endCode;
  if (code === LOST) return p.natsWindows.find((w) => overlaps(w, client.endedAt ?? p.endOfHistory));
  if (code !== undefined && endedByEdge(code) && client.brokenAt !== undefined) return { target: 'edge', from, to: client.brokenAt, what: `${code}: ended by the edge` };
  return undefined;
}

/**
 * A close that counts the events it follows (`data.events`, docs/gateway.md): the app got each of
 * them (open and messages, ids `<conn>:1..N`). A close that says `edgeLost` counts nothing: the
 * tail check above judges those.
 */
function closeCounts(conns: readonly Conn[]): { checked: number; anomalies: string[] } {
  const anomalies: string[] = [];
  let checked = 0;
  for (const c of conns) {
    const close = c.events.find((e) => e.action === 'close');
    if (close?.closeEvents === undefined) continue;
    checked++;
    const got = new Set(c.events.filter((e) => e.action !== 'close').map((e) => Number(e.eventId.slice(e.eventId.lastIndexOf(':') + 1))));
    const missing = Array.from({ length: close.closeEvents }, (_, i) => i + 1).filter((seq) => !got.has(seq));
    if (missing.length > 0) anomalies.push(`${short(c.connId)}: its close (n=${close.n}) follows ${close.closeEvents} events; the app never got ${missing.length} of them (first seq ${missing[0]}, last ${missing[missing.length - 1]})`);
  }
  return { checked, anomalies };
}

export function checkWs(lines: readonly HistoryLine[]): Verdict[] {
  const p = parse(lines);
  const conns = [...p.conns.values()];
  const byClient = connsByClient(p);
  const opened = [...p.clients.values()].filter((c) => c.outcome === 'ok');

  const openFirst: string[] = [];
  for (const c of conns) {
    const opens = c.events.filter((e) => e.action === 'open');
    if (c.events[0]?.action !== 'open') openFirst.push(`${short(c.connId)}: first callback is ${c.events[0]?.action ?? 'none'} (n=${c.events[0]?.n}), open ${opens.length === 0 ? 'never came' : `came at n=${opens[0].n}`}`);
    if (opens.length > 1) openFirst.push(`${short(c.connId)}: ${opens.length} opens (n=${opens.map((o) => o.n).join(',')})`);
  }

  const order: string[] = [];
  const twice: string[] = [];
  let messages = 0;
  const seen = new Map<string, Arrival>();
  for (const c of conns) {
    if (c.clients.size > 1) order.push(`${short(c.connId)} carries messages of ${c.clients.size} clients: ${[...c.clients].join(', ')}`);
    const last = new Map<string, number>();
    for (const e of c.events) {
      if (e.action !== 'message' || e.client === undefined || e.cseq === undefined) continue;
      messages++;
      const key = `${e.client}#${e.cseq}`;
      const before = seen.get(key);
      if (before) twice.push(`${e.client} message ${e.cseq} delivered twice under event ids ${before.eventId} (n=${before.n}) and ${e.eventId} (n=${e.n})`);
      else seen.set(key, e);
      const prev = last.get(e.client);
      if (prev !== undefined && e.cseq <= prev && !before) order.push(`${e.client}: message ${e.cseq} arrived after ${prev} on ${short(c.connId)} (n=${e.n})`);
      last.set(e.client, Math.max(prev ?? 0, e.cseq));
    }
  }

  const redeliveries: string[] = [];
  let redelivered = 0;
  let redeliveredAfterClose = 0;
  for (const c of conns) {
    const closeAt = c.events.find((e) => e.action === 'close')?.n;
    for (const r of c.redelivered) {
      redelivered++;
      if (closeAt !== undefined && r.n > closeAt && r.action !== 'close') redeliveredAfterClose++;
      const first = c.events.find((e) => e.eventId === r.eventId)!;
      // A close the cluster raised without its edge says edgeLost; the edge's own, if the edge was
      // only slow to answer, counts its events: same id, the first one counts (docs/gateway.md).
      const edgeLostClose = r.action === 'close' && (first.edgeLost === true || r.edgeLost === true);
      if (first.body !== r.body && !edgeLostClose) redeliveries.push(`${r.eventId}: redelivered (n=${r.n}) with another body than at n=${first.n}`);
    }
  }

  const oneClose: string[] = [];
  const afterClose: string[] = [];
  // A connection open when every node lost power at once, or ended within the retry period before
  // (its edge may still have held its events and close): nothing that knew it survived (its edge and
  // every callback replica held it in memory: docs/gateway.md "The exact loss window"), so no close
  // can come. Counted, not excused elsewhere: its other callbacks are judged as ever.
  let closesLostToPowerCuts = 0;
  const openAtPowerCut = (c: Conn) => {
    const client = [...c.clients].map((id) => p.clients.get(id)).find((x) => x !== undefined);
    return p.powerCuts.some((cut) => (c.all[0]?.t ?? Infinity) <= cut.from && (client?.endedAt ?? Infinity) + HELD_AFTER_END_MS >= cut.from);
  };
  for (const c of conns) {
    const closes = c.events.filter((e) => e.action === 'close');
    if (closes.length === 0 && openAtPowerCut(c)) {
      closesLostToPowerCuts++;
      continue;
    }
    if (closes.length === 0) oneClose.push(`${short(c.connId)}: no close (last callback ${c.events[c.events.length - 1]?.action} at n=${c.events[c.events.length - 1]?.n})`);
    if (closes.length > 1) oneClose.push(`${short(c.connId)}: ${closes.length} closes (event ids ${closes.map((e) => e.eventId).join(', ')})`);
    if (closes.length === 0) continue;
    const after = c.events.filter((e) => e.n > closes[0].n && e.action !== 'close');
    if (after.length > 0) afterClose.push(`${short(c.connId)}: ${after.length} callback(s) after its close (n=${closes[0].n}): first ${after[0].action} ${after[0].eventId} at n=${after[0].n}`);
  }

  // A connection whose edge died (kill -9 or drain) while it was open: its close within the bound.
  const late: string[] = [];
  let killed = 0;
  const bound = p.peerDeadMs + CLOSE_SLACK_MS;
  for (const c of conns) {
    const target = edgeOfConn(p, c.connId);
    const client = [...c.clients].map((id) => p.clients.get(id)).find((x) => x !== undefined);
    const start = Math.min(c.all[0]?.t ?? Infinity, client?.invokedAt ?? Infinity);
    if (target === undefined) {
      if (p.downs.some((d) => d.target.startsWith('edge') && d.t >= start)) late.push(`${short(c.connId)}: its edge is not named in the history (no ws edge line for its bus id): its close cannot be timed`);
      continue;
    }
    const down = p.downs.find((d) => d.target === target && d.t >= start);
    if (!down) continue;
    const close = c.events.find((e) => e.action === 'close');
    // Ended before the fault: by its close, or (its close missing, another check's finding) by its client's.
    if (close && close.t <= down.startedAt) continue;
    if (!close && client?.endedAt !== undefined && client.endedAt <= down.startedAt) continue;
    killed++;
    if (!close && p.powerCuts.some((cut) => down.startedAt >= cut.from && down.startedAt <= cut.to)) continue; // nothing survived to close it (counted above)
    if (!close) late.push(`${short(c.connId)} on ${target}: ${down.kind} (down at t=${down.t}) and no close ever came`);
    else if (close.t > down.t + bound) late.push(`${short(c.connId)} on ${target}: close ${close.t - down.t} ms after ${down.kind} was down (bound ${bound} ms), n=${close.n}`);
  }

  // Every connection a client saw open reaches the app, unless its edge lost it (kill -9, pause).
  const reached: string[] = [];
  const lost: string[] = [];
  let excused = 0;
  let sentTotal = 0;
  for (const cl of opened) {
    const mine = byClient.get(cl.client) ?? [];
    if (mine.length > 1) reached.push(`${cl.client}'s messages arrived on ${mine.length} connections: ${mine.map((m) => short(m.connId)).join(', ')}`);
    const conn = mine[0];
    const excuse = lossExcuse(p, cl, conn);
    const sent = cl.sent.filter((s) => !cl.sendErrors.has(s));
    sentTotal += sent.length;
    if (!conn) {
      if (sent.length === 0) continue;
      if (excuse) excused++;
      else reached.push(`${cl.client}: connected (ok at t=${cl.openedAt}) and sent ${sent.length} message(s); the app saw none of them${cl.endCode === undefined ? '' : ` (ended with ${cl.endCode})`}`);
      continue;
    }
    const got = new Set(conn.events.filter((e) => e.client === cl.client).map((e) => e.cseq));
    const missing = sent.filter((s) => !got.has(s));
    if (missing.length === 0) continue;
    // Loss is of the unsettled tail: what arrived is a prefix of what was sent.
    const gap = missing.find((m) => sent.some((s) => s > m && got.has(s)));
    if (gap !== undefined) lost.push(`${cl.client}: message ${gap} missing while later ones arrived (on ${short(conn.connId)})`);
    else if (excuse) excused++;
    else lost.push(`${cl.client}: ${missing.length} of ${sent.length} message(s) never delivered (first ${missing[0]}, client ended with ${cl.endCode ?? 'nothing'}, on ${short(conn.connId)} ${edgeOfConn(p, conn.connId) ?? '?'}) and no kill -9, drain or pause of its edge while it lived`);
  }
  const unnamed = conns.filter((c) => c.clients.size === 0).length;
  const counted = closeCounts(conns);

  const signed = conns.flatMap((c) => c.all.filter((a) => !a.sigOk).map((a) => `${a.eventId} (${a.action}, n=${a.n}): bad signature`));

  return [
    { check: 'ws: each connection\'s first callback is its open, once', checked: conns.length, anomalies: openFirst },
    { check: 'ws: messages arrive in each client\'s send order', checked: messages, anomalies: order },
    { check: 'ws: no message delivered twice (under two event ids)', checked: messages, anomalies: twice },
    { check: 'ws: a redelivered event keeps its id and body', checked: redelivered, anomalies: redeliveries },
    { check: 'ws: exactly one close per connection', checked: conns.length, anomalies: oneClose },
    { check: 'ws: no callback after a connection\'s close', checked: conns.length, anomalies: afterClose },
    { check: `ws: a dead edge's connections close within peerDeadMs + ${CLOSE_SLACK_MS / 1000} s`, checked: killed, anomalies: late },
    { check: 'ws: every connection a client saw open reaches the app', checked: opened.length, anomalies: reached },
    { check: 'ws: sent messages arrive (a killed, drained or paused edge, one fenced by a NATS restart, or a close by the edge loses a tail only)', checked: sentTotal, anomalies: lost },
    { check: 'ws: a close that says how many events it follows comes after all of them', checked: counted.checked, anomalies: counted.anomalies },
    { check: 'ws: every callback is signed with the app\'s callback key (derived from its secret)', checked: conns.reduce((n, c) => n + c.all.length, 0), anomalies: signed },
    // Not a property: the counts a reader needs to judge how much the run exercised.
    { check: `ws: (info) lost to edge faults: ${excused} clients; unnamed conns: ${unnamed}; redelivered after close: ${redeliveredAfterClose}; closes lost to power cuts: ${closesLostToPowerCuts}`, checked: opened.length, anomalies: [] },
    // A rolling upgrade holds a stricter rule than faults do: only the edge being replaced closes connections.
    ...(hasUpgrade(lines) ? checkWsUpgrade(lines, p) : []),
  ];
}
