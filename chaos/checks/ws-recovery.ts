import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';
import { parse } from './ws-history.js';
import { hasUpgrade } from './ws-upgrade.js';

/**
 * Gateway history and recovery (docs/protocol.md "History and recovery", docs/gateway.md "History
 * and recovery"), checked from the history alone. What the ws workload records (kind `ws`):
 *
 * - `broadcast` invoke `{user, pid}`, then ok `{delivered, kept, offset, epoch}`, fail (a 4xx:
 *   nothing kept or sent) or unknown (no answer, a 5xx: it may have been kept and delivered). The
 *   payload is `{chaos: 'broadcast', user, id: pid}`: its id names its user.
 * - `connect` invoke `{client, slot, user, recover}`: `recover` is what the connection asked
 *   (`''`: no position, `<epoch>:<offset>`: from there); a slot is one browser, its clients its
 *   connections one after another.
 * - `recovery` info `{client, recovered, epoch, offset, missed, reason?}`: the recovery frame.
 * - `frame` info `{client, offset?, pid, user}` for each app message, in arrival order; `raw: true`
 *   when the edge did not wrap it, `odd` for a frame that is not a broadcast of the workload.
 * - `close` ok (the client closed it and the server answered), `break`.
 * - `process` `edge log` info `{target, starts, historyOff, gapsSkipped}` (chaos/run.ts, after the
 *   run): how often an edge said "gateway history: off", and how many live gaps it skipped unread.
 *
 * A session is one connection that asked for recovery. Its start S is the position it asked
 * (recovered: true) or the recovery frame's offset (recovered: false: it started over there; the
 * frame's offset is the history's head, and only what is kept after it comes live); its end L is
 * the last offset it saw (for a session the client closed and the server answered, at least the
 * frame's offset: the replay was written before anything else). Every acknowledged kept broadcast
 * to its user in its epoch with S < offset <= L arrived in it, once, in offset order. A browser's
 * life is its sessions from one that started over up to the next one that did (or a raw one): every
 * acknowledged kept broadcast between the life's first start and its last end arrived in one of them.
 */

const REASONS = ['new', 'epoch', 'gap', 'off', 'unavailable'];
/** Anomalies listed per check, at most (the count is in the message when cut). */
const MAX_LISTED = 50;

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

interface Send {
  pid: string;
  user: string;
  n: number;
  outcome?: 'ok' | 'fail' | 'unknown';
  kept?: boolean;
  offset?: number;
  epoch?: string;
}

interface Frame {
  n: number;
  offset?: number;
  pid?: string;
  user?: string;
  raw: boolean;
  odd?: string;
}

interface Session {
  client: string;
  slot: string;
  user: string;
  n: number;
  /** What it asked: null for no position (`recover=`). */
  asked: { epoch: string; offset: number } | null;
  askedText: string;
  connected: boolean;
  recovery?: { n: number; recovered: boolean; epoch: string | null; offset: number | null; missed: number; reason?: string };
  frames: Frame[];
  /** The client closed it and the server answered. */
  closedClean: boolean;
}

/** A session's range of claims: its epoch, start (exclusive) and end (inclusive). */
interface Span {
  epoch: string;
  from: number;
  to: number;
}

const POSITION = /^(.+):(\d+)$/;

function read(lines: readonly HistoryLine[]) {
  const sends = new Map<string, Send>();
  const sessions = new Map<string, Session>();
  const edgeLogs: Array<{ target: string; starts: number; historyOff: number; gapsSkipped: number }> = [];
  for (const l of lines) {
    if (l.kind === 'process' && l.op === 'edge log') {
      edgeLogs.push({ target: str(l.target) ?? '?', starts: num(l.starts) ?? 0, historyOff: num(l.historyOff) ?? 0, gapsSkipped: num(l.gapsSkipped) ?? 0 });
      continue;
    }
    if (l.kind !== 'ws') continue;
    if (l.op === 'broadcast') {
      const pid = str(l.pid);
      if (pid === undefined) continue;
      if (l.phase === 'invoke') sends.set(pid, { pid, user: str(l.user) ?? '', n: l.n });
      else if (l.phase === 'ok' || l.phase === 'fail' || l.phase === 'unknown') {
        const s = sends.get(pid);
        if (!s) continue;
        s.outcome = l.phase;
        if (l.phase === 'ok') {
          s.kept = l.kept === true;
          s.offset = num(l.offset);
          s.epoch = str(l.epoch);
        }
      }
      continue;
    }
    const client = str(l.client);
    if (client === undefined) continue;
    if (l.op === 'connect' && l.phase === 'invoke') {
      const recover = str(l.recover);
      // A connection that did not ask for recovery is no session of this check.
      if (recover === undefined) continue;
      const m = POSITION.exec(recover);
      sessions.set(client, {
        client,
        slot: String(l.slot ?? client),
        user: str(l.user) ?? '',
        n: l.n,
        asked: m ? { epoch: m[1], offset: Number(m[2]) } : null,
        askedText: recover,
        connected: false,
        frames: [],
        closedClean: false,
      });
      continue;
    }
    const s = sessions.get(client);
    if (!s) continue;
    if (l.op === 'connect' && l.phase === 'ok') s.connected = true;
    else if (l.op === 'recovery' && !s.recovery)
      s.recovery = { n: l.n, recovered: l.recovered === true, epoch: str(l.epoch) ?? null, offset: num(l.offset) ?? null, missed: num(l.missed) ?? 0, reason: str(l.reason) };
    else if (l.op === 'recovery') s.frames.push({ n: l.n, raw: false, odd: 'a second recovery frame' });
    else if (l.op === 'frame') s.frames.push({ n: l.n, offset: num(l.offset), pid: str(l.pid), user: str(l.user), raw: l.raw === true, odd: str(l.odd) });
    else if (l.op === 'close' && l.phase === 'ok') s.closedClean = true;
  }
  return { sends, sessions, edgeLogs };
}

/** A session's claim: from its start to the last offset it saw; null when it makes none. */
function spanOf(s: Session): Span | null {
  const r = s.recovery;
  if (!r || r.epoch === null || s.frames.some((f) => f.raw)) return null;
  let from: number;
  if (r.recovered) {
    if (!s.asked || s.asked.epoch !== r.epoch) return null; // an anomaly of its own (the frame's check)
    from = s.asked.offset;
  } else {
    if (r.offset === null) return null;
    from = r.offset;
  }
  let to = from;
  for (const f of s.frames) if (f.offset !== undefined && f.offset > to) to = f.offset;
  if (r.recovered && s.closedClean && r.offset !== null && r.offset > to) to = r.offset;
  return { epoch: r.epoch, from, to };
}

function listed(anomalies: string[]): string[] {
  return anomalies.length > MAX_LISTED ? [...anomalies.slice(0, MAX_LISTED), `… and ${anomalies.length - MAX_LISTED} more`] : anomalies;
}

export function checkWsRecovery(lines: readonly HistoryLine[]): Verdict[] {
  const upgrade = hasUpgrade(lines);
  const { sends, sessions, edgeLogs } = read(lines);
  const all = [...sessions.values()].filter((s) => s.connected);
  const heard = all.filter((s) => s.recovery || s.frames.length > 0);

  // Kept, acknowledged sends per user and epoch, in offset order: what the claims are about.
  const keptOf = new Map<string, Send[]>();
  const okSends = [...sends.values()].filter((s) => s.outcome === 'ok');
  for (const s of okSends) {
    if (!s.kept || s.offset === undefined || s.epoch === undefined) continue;
    const key = `${s.user}|${s.epoch}`;
    const list = keptOf.get(key);
    if (list) list.push(s);
    else keptOf.set(key, [s]);
  }
  for (const list of keptOf.values()) list.sort((a, b) => a.offset! - b.offset!);
  const claimable = (user: string, span: Span) => (keptOf.get(`${user}|${span.epoch}`) ?? []).filter((s) => s.offset! > span.from && s.offset! <= span.to);

  // 1. The frames a recovering connection gets: its recovery frame first, then wrapped broadcasts.
  const shape: string[] = [];
  let raw = 0;
  for (const s of heard) {
    if (s.frames.some((f) => f.raw)) {
      raw++;
      // During a rolling upgrade an old edge ignores `recover`; otherwise every edge honours it.
      if (!upgrade) shape.push(`${s.client}: the edge did not answer recover=${s.askedText} with a recovery frame (${s.frames.length} raw frame(s), first at n=${s.frames[0].n})`);
    }
    for (const f of s.frames) if (f.odd !== undefined) shape.push(`${s.client}: a frame that is no broadcast at n=${f.n}: ${f.odd}`);
  }

  // 2. What each recovery frame says.
  const said: string[] = [];
  const outcomes = new Map<string, number>();
  for (const s of heard) {
    const r = s.recovery;
    if (!r) continue;
    const outcome = r.recovered ? 'recovered' : (r.reason ?? 'no reason');
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    const where = `${s.client} (asked ${s.askedText || '<none>'}, n=${r.n})`;
    if (r.recovered) {
      if (!s.asked) said.push(`${where}: recovered: true without a position asked`);
      else if (r.epoch !== s.asked.epoch) said.push(`${where}: recovered: true in epoch ${r.epoch}`);
      else if (r.offset === null || r.offset < s.asked.offset) said.push(`${where}: recovered: true at offset ${r.offset}, before the position asked`);
      else {
        const replay = s.frames.filter((f) => f.offset !== undefined && f.offset > s.asked!.offset && f.offset <= r.offset!);
        const reached = s.frames.some((f) => f.offset !== undefined && f.offset >= r.offset!) || s.closedClean;
        if (r.missed < 0 || (r.missed === 0 && r.offset !== s.asked.offset)) said.push(`${where}: missed ${r.missed} but the replay ends at ${r.offset}`);
        else if (reached && replay.length !== r.missed) said.push(`${where}: missed ${r.missed}, and ${replay.length} frame(s) came up to its offset ${r.offset}`);
      }
      if (r.reason !== undefined) said.push(`${where}: recovered: true with a reason (${r.reason})`);
    } else {
      if (r.reason === undefined || !REASONS.includes(r.reason)) said.push(`${where}: recovered: false with reason ${r.reason}`);
      // No position asked: `new`, unless the history could not even say where it stands (off, unavailable).
      else if (s.asked ? r.reason === 'new' : !['new', 'off', 'unavailable'].includes(r.reason)) said.push(`${where}: reason ${r.reason}, for ${s.asked ? 'a position' : 'no position'}`);
      if (r.missed !== 0) said.push(`${where}: recovered: false yet missed ${r.missed}`);
      if ((r.epoch === null) !== (r.offset === null)) said.push(`${where}: epoch ${r.epoch} with offset ${r.offset}`);
    }
  }

  // 3 and 4. Within a session: no broadcast twice, offsets strictly increasing.
  const twice: string[] = [];
  const order: string[] = [];
  let frames = 0;
  for (const s of heard) {
    const pids = new Map<string, number>();
    const offsets = new Map<number, Frame>();
    let last: Frame | undefined;
    for (const f of s.frames) {
      if (f.odd !== undefined) continue;
      frames++;
      if (f.pid !== undefined) {
        const before = pids.get(f.pid);
        if (before !== undefined) {
          // Told here; not again as out of order.
          twice.push(`${s.client}: ${f.pid} arrived twice (n=${before} and n=${f.n})`);
          continue;
        }
        pids.set(f.pid, f.n);
      }
      if (f.offset === undefined) continue;
      const before = offsets.get(f.offset);
      // The same send twice is told above; two sends under one offset here.
      if (before && before.pid !== f.pid) twice.push(`${s.client}: offset ${f.offset} arrived twice, with ${before.pid} (n=${before.n}) and ${f.pid} (n=${f.n})`);
      else if (!before) offsets.set(f.offset, f);
      if (last?.offset !== undefined && f.offset <= last.offset) order.push(`${s.client}: offset ${f.offset} (${f.pid}, n=${f.n}) after ${last.offset} (${last.pid}, n=${last.n})`);
      last = f;
    }
  }

  // 5. Nothing from nowhere: each frame is a send to its session's user, under that send's offset;
  // one offset is one send's everywhere (a send of unknown outcome may be kept: its offset is taken
  // from the frames, and must be one).
  const nowhere: string[] = [];
  const byOffset = new Map<string, { pid: string; where: string }>();
  const offsetOfPid = new Map<string, { offset: number; where: string }>();
  for (const s of okSends) if (s.kept && s.offset !== undefined && s.epoch !== undefined) byOffset.set(`${s.epoch}:${s.offset}`, { pid: s.pid, where: 'its send' });
  let sourced = 0;
  for (const s of heard) {
    const epoch = s.recovery?.epoch ?? null;
    for (const f of s.frames) {
      if (f.odd !== undefined) continue;
      sourced++;
      const at = `${s.client} n=${f.n}`;
      const send = f.pid === undefined ? undefined : sends.get(f.pid);
      if (!send || send.n > f.n) {
        nowhere.push(`${at}: ${f.pid ?? 'a frame without an id'}${f.offset === undefined ? '' : ` at offset ${f.offset}`} was never sent${send ? ' before it arrived' : ''}`);
        continue;
      }
      if (send.user !== s.user || f.user !== s.user) nowhere.push(`${at}: ${f.pid} (${send.user}'s) reached a client of ${s.user}${f.offset === undefined ? '' : ` at offset ${f.offset}`}`);
      if (send.outcome === 'fail') nowhere.push(`${at}: ${f.pid} arrived though its send was refused`);
      // A raw frame (an old edge, during an upgrade) carries no offset: only its id is judged.
      if (send.outcome === 'ok' && send.kept && !f.raw && f.offset !== send.offset) nowhere.push(`${at}: ${f.pid} arrived ${f.offset === undefined ? 'without an offset' : `at offset ${f.offset}`}, kept at ${send.offset}`);
      if (send.outcome === 'ok' && !send.kept && f.offset !== undefined) nowhere.push(`${at}: ${f.pid} arrived at offset ${f.offset}, its send said not kept`);
      if (f.offset === undefined || f.pid === undefined) continue;
      if (!f.raw && epoch !== null) {
        const key = `${epoch}:${f.offset}`;
        const owner = byOffset.get(key);
        if (owner && owner.pid !== f.pid) nowhere.push(`${at}: offset ${f.offset} carried ${f.pid}, but it is ${owner.pid}'s (${owner.where})`);
        else if (!owner) byOffset.set(key, { pid: f.pid, where: at });
      }
      const had = offsetOfPid.get(f.pid);
      if (had && had.offset !== f.offset) nowhere.push(`${at}: ${f.pid} arrived at offset ${f.offset}, and at ${had.offset} (${had.where})`);
      else if (!had) offsetOfPid.set(f.pid, { offset: f.offset, where: at });
    }
  }

  // 6. Each session: every acknowledged kept send from its start to its end, once, in order.
  const missing: string[] = [];
  let claims = 0;
  let spans = 0;
  const spanOfSession = new Map<string, Span>();
  for (const s of heard) {
    const span = spanOf(s);
    if (!span) continue;
    spanOfSession.set(s.client, span);
    spans++;
    const got = new Set(s.frames.map((f) => f.pid));
    const owed = claimable(s.user, span);
    claims += owed.length;
    const lost = owed.filter((o) => !got.has(o.pid));
    if (lost.length > 0) {
      const how = s.recovery!.recovered ? `recovered from ${span.from}` : `started over at ${span.from} (${s.recovery!.reason})`;
      missing.push(`${s.client} (${s.user}, ${how}, saw up to ${span.to}): ${lost.length} of ${owed.length} acknowledged send(s) never arrived, first offset ${lost[0].offset} (${lost[0].pid})`);
    }
  }

  // 7. Each browser's life: from the position it started over at to the last it reached, every
  // acknowledged kept send arrived at least once, whichever connection it came on.
  const lifeGaps: string[] = [];
  let lifeClaims = 0;
  let lives = 0;
  const slots = new Map<string, Session[]>();
  for (const s of all) {
    const list = slots.get(s.slot);
    if (list) list.push(s);
    else slots.set(s.slot, [s]);
  }
  for (const list of slots.values()) {
    list.sort((a, b) => a.n - b.n);
    let life: { user: string; span: Span; sessions: Session[] } | null = null;
    const end = () => {
      if (!life) return;
      lives++;
      const got = new Set(life.sessions.flatMap((s) => s.frames.map((f) => f.pid)));
      const owed = claimable(life.user, life.span);
      lifeClaims += owed.length;
      const lost = owed.filter((o) => !got.has(o.pid));
      if (lost.length > 0) lifeGaps.push(`slot ${life.sessions[0].slot}, sessions ${life.sessions.map((s) => s.client).join(',')} (${life.user}, ${life.span.from}..${life.span.to}): ${lost.length} acknowledged send(s) reached none of them, first offset ${lost[0].offset} (${lost[0].pid})`);
      life = null;
    };
    for (const s of list) {
      if (!s.recovery && s.frames.length === 0) continue; // nothing came: the next asks from the same position
      const span = spanOfSession.get(s.client);
      const r = s.recovery;
      if (!span || !r) {
        end(); // raw, or no position to claim from: the browser starts over
        continue;
      }
      if (!r.recovered || !life || life.span.epoch !== span.epoch) {
        end();
        life = { user: s.user, span: { ...span }, sessions: [s] };
      } else {
        life.span.to = Math.max(life.span.to, span.to);
        life.sessions.push(s);
      }
    }
    end();
  }

  // 8. History is on in the chaos run: every acknowledged send kept, no recovery says off, no edge said it was off.
  const on: string[] = [];
  if (!upgrade) {
    for (const s of okSends) if (s.kept !== true || s.offset === undefined || s.epoch === undefined) on.push(`${s.pid}: acknowledged with kept ${String(s.kept)}, offset ${s.offset}, epoch ${s.epoch}`);
    for (const s of heard) if (s.recovery?.reason === 'off') on.push(`${s.client}: recovery answered off (n=${s.recovery.n})`);
    for (const e of edgeLogs) if (e.historyOff > 0) on.push(`${e.target}: said "gateway history: off" ${e.historyOff} time(s) in ${e.starts} start(s)`);
  }

  // 8b. One name for the history: no chain is reinstalled in a chaos run and no stream made again, so
  // every send a user's chain kept, through whichever edge, and every recovery frame says one epoch.
  // (Two edges that named the stream differently did not order each other's messages, and lost some.)
  const named: string[] = [];
  const epochsOf = new Map<string, Map<string, string>>();
  // An epoch is `<the stream's>-<the install's>`: a chain is a user's install.
  const name = (user: string, epoch: string, where: string) => {
    const chain = `${user} (install ${epoch.slice(epoch.indexOf('-') + 1)})`;
    const seen = epochsOf.get(chain) ?? new Map<string, string>();
    epochsOf.set(chain, seen);
    if (!seen.has(epoch)) seen.set(epoch, where);
  };
  for (const s of okSends) if (s.kept && s.epoch !== undefined) name(s.user, s.epoch, s.pid);
  for (const s of heard) if (s.recovery?.epoch) name(s.user, s.recovery.epoch, `${s.client}'s recovery frame`);
  for (const [chain, seen] of epochsOf) if (seen.size > 1) named.push(`${chain}: ${seen.size} epochs (${[...seen].slice(0, 4).map(([e, where]) => `${e}, first by ${where}`).join('; ')})`);

  // 9. The app's open callback tells what the client was told.
  const told: string[] = [];
  let compared = 0;
  const p = parse(lines);
  for (const c of p.conns.values()) {
    if (c.clients.size !== 1) continue;
    const s = sessions.get([...c.clients][0]);
    const r = s?.recovery;
    const open = c.events.find((e) => e.action === 'open');
    if (!s || !r || !open) continue;
    compared++;
    const data = (JSON.parse(open.body) as [string, { recovery?: Record<string, unknown> }])[1]?.recovery;
    const want = { recovered: r.recovered, since: s.asked?.offset ?? null, offset: r.offset, missed: r.missed, reason: r.reason };
    const got = data && { recovered: data.recovered, since: data.since ?? null, offset: data.offset ?? null, missed: data.missed, reason: data.reason };
    if (JSON.stringify(got) !== JSON.stringify(want)) told.push(`${s.client} on ${c.connId.slice(0, 20)}…: the open callback said ${JSON.stringify(data ?? null)}, the client was told ${JSON.stringify(want)}`);
  }

  const count = (o: string) => outcomes.get(o) ?? 0;
  const sendsBy = (o: string) => [...sends.values()].filter((s) => s.outcome === o).length;
  const keptCount = okSends.filter((s) => s.kept).length;
  const others = [...outcomes].filter(([o]) => o !== 'recovered' && !REASONS.includes(o)).map(([o, k]) => `${o} ${k}`);
  const epochs = new Set(okSends.filter((s) => s.epoch !== undefined).map((s) => `${s.user}|${s.epoch}`)).size;
  return [
    { check: 'ws recovery: a recovering connection gets its recovery frame first, then wrapped broadcasts', checked: heard.length, anomalies: listed(shape) },
    { check: 'ws recovery: each recovery frame holds what it says (epoch, offset, missed, reason)', checked: [...outcomes.values()].reduce((a, b) => a + b, 0), anomalies: listed(said) },
    { check: 'ws recovery: no broadcast twice within a connection', checked: frames, anomalies: listed(twice) },
    { check: 'ws recovery: offsets strictly increase within a connection', checked: frames, anomalies: listed(order) },
    { check: "ws recovery: nothing from nowhere (each frame a send to its user, at its send's offset)", checked: sourced, anomalies: listed(nowhere) },
    { check: 'ws recovery: each connection gets every acknowledged send from its position to the last it saw', checked: claims, anomalies: listed(missing) },
    { check: "ws recovery: each browser's recovered connections together miss no acknowledged send", checked: lifeClaims, anomalies: listed(lifeGaps) },
    ...(upgrade ? [] : [{ check: 'ws recovery: history is on (every acknowledged send kept; no edge or recovery says off)', checked: okSends.length + edgeLogs.length, anomalies: listed(on) }]),
    // An upgrade starts from 0.2, whose edges named the stream by the creation time each reached.
    ...(upgrade ? [] : [{ check: 'ws recovery: every edge names the history alike (one epoch per chain)', checked: epochsOf.size, anomalies: listed(named) }]),
    { check: "ws recovery: the app's open callback tells the recovery the client got", checked: compared, anomalies: listed(told) },
    // Not a property: how much the run exercised.
    {
      check: `ws recovery: (info) sends kept ${keptCount}, unknown ${sendsBy('unknown')}, refused ${sendsBy('fail')}; recoveries: recovered ${count('recovered')}, new ${count('new')}, gap ${count('gap')}, epoch ${count('epoch')}, unavailable ${count('unavailable')}, off ${count('off')}${others.length ? `, ${others.join(', ')}` : ''}; connections without a recovery frame ${all.length - heard.filter((s) => s.recovery).length}, raw ${raw}; claims from ${spans} connections, ${lives} lives; user epochs ${epochs}; live gaps edges skipped unread ${edgeLogs.reduce((n, e) => n + e.gapsSkipped, 0)}`,
      checked: heard.length,
      anomalies: [],
    },
  ];
}
