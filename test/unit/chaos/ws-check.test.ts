import test from 'ava';
import { checkWs } from '../../../chaos/checks/ws.js';
import type { HistoryLine } from '../../../chaos/history.js';
import type { Verdict } from '../../../chaos/workload.js';

// The ws checker on synthetic histories: a history that keeps the gateway's delivery contract
// passes with exact counts; each way of breaking it is caught by its own check, and only by it.

const E1 = 'aaaaaaaaaaaa';
const E2 = 'bbbbbbbbbbbb';
const A1 = `${E1}.conn-a1-xxxxxxxxxxxxxx`;
const A2 = `${E1}.conn-a2-xxxxxxxxxxxxxx`;
const B1 = `${E2}.conn-b1-xxxxxxxxxxxxxx`;

/** A history written step by step, each line `dt` ms after the previous. */
class Story {
  readonly lines: HistoryLine[] = [];
  private t = 1_700_000_000_000;
  private n = 0;
  private ids = 0;

  line(kind: string, phase: HistoryLine['phase'], op: string, fields: Record<string, unknown> = {}, dt = 10): this {
    this.t += dt;
    this.lines.push({ t: this.t, n: this.n++, kind, phase, op, id: `${kind}-${++this.ids}`, ...fields });
    return this;
  }

  connect(client: string, outcome: 'ok' | 'fail' | 'unknown' = 'ok'): this {
    return this.line('ws', 'invoke', 'connect', { client }).line('ws', outcome, 'connect', { client });
  }

  send(client: string, ...seqs: number[]): this {
    for (const seq of seqs) this.line('ws', 'info', 'send', { client, seq });
    return this;
  }

  /** A callback the app accepted; `seq` is Pier's per-connection seq (the event id's suffix). */
  cb(conn: string, seq: number, action: string, message?: [string, number], fields: Record<string, unknown> = {}, dt = 10): this {
    const data = message ? { event: 'chaos', data: { client: message[0], seq: message[1] } } : {};
    return this.line('ws', 'info', 'callback', { conn_id: conn, action, data, event_id: `${conn}:${seq}`, seq, sig_ok: true, ...fields }, dt);
  }

  close(client: string, code = 1000): this {
    return this.line('ws', 'invoke', 'close', { client }).line('ws', 'ok', 'close', { client, code });
  }
}

interface Twists {
  /** c1's message 2 delivered again under a new event id. */
  duplicate?: boolean;
  /** c1's messages 2 and 3 arrive swapped. */
  reorder?: boolean;
  /** A1 gets no close. */
  missingClose?: boolean;
  /** A1 gets a second close under a new event id. */
  twoCloses?: boolean;
  /** B1 gets a message after its close. */
  afterClose?: boolean;
  /** A2 (on the killed edge-1) gets its close 13 s after the kill. */
  lateClose?: boolean;
  /** c1's message 3 never arrives, and no fault explains it. */
  lostMessage?: boolean;
  /** c3 (on the killed edge) gets messages 1 and 3, not 2. */
  gap?: boolean;
  /** A1's first callback is a message, its open after it. */
  openLate?: boolean;
  /** c5 connects (ok) after the faults and sends; the app sees nothing of it. */
  unseenClient?: boolean;
  /** One of B1's callbacks failed the signature check. */
  badSignature?: boolean;
  /** B1's redelivered event comes with another body. */
  changedRedelivery?: boolean;
  /** A1's close says it follows 5 events; the app got 4 (an event given up, the close looking complete). */
  undercounted?: boolean;
}

/**
 * c1 on edge-1 (A1) and c2 on edge-2 (B1) send and close; B1's message 1 is redelivered (same
 * event id, allowed); c3 on edge-1 (A2) sends 3, edge-1 is killed after the first arrived, its
 * close comes 3 s after the kill and messages 2 and 3 are lost (allowed: the loss window); c4 is refused.
 */
function story(x: Twists = {}): HistoryLine[] {
  const s = new Story();
  s.line('run', 'info', 'start', { seed: 1, peerDeadMs: 2_000 });
  s.line('ws', 'info', 'edge', { bus_id: E1, target: 'edge-1', pid: 10 });
  s.line('ws', 'info', 'edge', { bus_id: E2, target: 'edge-2', pid: 11 });

  s.connect('c1').send('c1', 1, 2, 3);
  if (x.openLate) s.cb(A1, 2, 'message', ['c1', 1]).cb(A1, 1, 'open');
  else s.cb(A1, 1, 'open').cb(A1, 2, 'message', ['c1', 1]);
  if (x.reorder) s.cb(A1, 3, 'message', ['c1', 3]).cb(A1, 4, 'message', ['c1', 2]);
  else if (x.lostMessage) s.cb(A1, 3, 'message', ['c1', 2]);
  else s.cb(A1, 3, 'message', ['c1', 2]).cb(A1, 4, 'message', ['c1', 3]);
  if (x.duplicate) s.cb(A1, 5, 'message', ['c1', 2]);
  s.close('c1');
  // A close says how many events it follows (docs/gateway.md): here the open and c1's messages.
  const a1Events = (x.lostMessage ? 3 : 4) + (x.duplicate ? 1 : 0) + (x.undercounted ? 1 : 0);
  if (!x.missingClose) s.line('ws', 'info', 'callback', { conn_id: A1, action: 'close', data: { events: a1Events }, event_id: `${A1}:close`, seq: 6, sig_ok: true });
  if (x.twoCloses) s.cb(A1, 7, 'close');

  s.connect('c2').send('c2', 1, 2);
  s.cb(B1, 1, 'open', undefined, x.badSignature ? { sig_ok: false } : {});
  s.cb(B1, 2, 'message', ['c2', 1]);
  s.cb(B1, 2, 'message', x.changedRedelivery ? ['c2', 9] : ['c2', 1]);
  s.cb(B1, 3, 'message', ['c2', 2]);
  s.close('c2').line('ws', 'info', 'callback', { conn_id: B1, action: 'close', data: { events: 3 }, event_id: `${B1}:close`, seq: 4, sig_ok: true });
  if (x.afterClose) s.cb(B1, 5, 'message', ['c2', 3]);

  s.connect('c3').send('c3', 1, 2, 3).cb(A2, 1, 'open').cb(A2, 2, 'message', ['c3', 1]);
  if (x.gap) s.cb(A2, 3, 'message', ['c3', 3]);
  s.line('fault', 'info', 'kill -9', { target: 'edge-1', roles: 'edge', downMs: 1_000 });
  s.line('fault', 'info', 'down', { target: 'edge-1', roles: 'edge', kind: 'kill -9' }, 50);
  s.line('ws', 'info', 'break', { client: 'c3', code: 1006, reason: '' });
  s.line('ws', 'info', 'callback', { conn_id: A2, action: 'close', data: { edgeLost: true }, event_id: `${A2}:close`, seq: x.gap ? 4 : 3, sig_ok: true }, x.lateClose ? 13_000 : 3_000);
  s.line('fault', 'info', 'healed', { target: 'edge-1', kind: 'kill -9' });

  s.connect('c4', 'fail');
  if (x.unseenClient) s.connect('c5').send('c5', 1).close('c5');
  s.line('run', 'info', 'end', {}, 100);
  return s.lines;
}

function verdict(verdicts: Verdict[], prefix: string): Verdict {
  const v = verdicts.find((x) => x.check.startsWith(prefix));
  if (!v) throw new Error(`no verdict starting "${prefix}" in ${verdicts.map((x) => x.check).join(' | ')}`);
  return v;
}

const CHECKS = {
  open: 'ws: each connection\'s first callback',
  order: 'ws: messages arrive in each client\'s send order',
  twice: 'ws: no message delivered twice',
  redelivery: 'ws: a redelivered event keeps',
  oneClose: 'ws: exactly one close',
  afterClose: 'ws: no callback after',
  late: 'ws: a dead edge\'s connections close within',
  reached: 'ws: every connection a client saw open',
  arrive: 'ws: sent messages arrive',
  signed: 'ws: every callback is signed',
  counted: 'ws: a close that says how many events it follows',
} as const;

test('a history that keeps the contract passes every check, with exact counts', (t) => {
  const verdicts = checkWs(story());
  t.deepEqual(
    verdicts.filter((v) => v.anomalies.length > 0).map((v) => `${v.check}: ${v.anomalies.join('; ')}`),
    [],
  );
  const counts = Object.fromEntries(Object.entries(CHECKS).map(([k, prefix]) => [k, verdict(verdicts, prefix).checked]));
  // 3 connections; 6 distinct messages delivered (A1 3, B1 2, A2 1); one redelivery; A2 the one on a
  // killed edge; c1–c3 opened (c4 refused); 8 messages sent; 13 callbacks accepted; two closes
  // count their events (A2's was raised by the cluster for its dead edge: it says edgeLost instead).
  t.deepEqual(counts, { open: 3, order: 6, twice: 6, redelivery: 1, oneClose: 3, afterClose: 3, late: 1, reached: 3, arrive: 8, signed: 13, counted: 2 });
});

/** Each twist is caught by exactly the named check, and its anomaly says what happened. */
const caught: Array<[keyof Twists, keyof typeof CHECKS, RegExp]> = [
  ['duplicate', 'twice', /c1 message 2 delivered twice under event ids \S+:3 .* and \S+:5/],
  ['reorder', 'order', /c1: message 2 arrived after 3/],
  ['missingClose', 'oneClose', /conn-a1.*: no close/],
  ['twoCloses', 'oneClose', /conn-a1.*: 2 closes/],
  ['afterClose', 'afterClose', /conn-b1.*: 1 callback\(s\) after its close .*first message/],
  ['lateClose', 'late', /conn-a2.* on edge-1: close 13\d\d\d ms after kill -9 was down \(bound 12000 ms\)/],
  ['lostMessage', 'arrive', /c1: 1 of 3 message\(s\) never delivered \(first 3/],
  ['gap', 'arrive', /c3: message 2 missing while later ones arrived/],
  ['openLate', 'open', /conn-a1.*: first callback is message .*open came at/],
  ['unseenClient', 'reached', /c5: connected .* sent 1 message\(s\); the app saw none of them/],
  ['badSignature', 'signed', /conn-b1.*:1 \(open, n=\d+\): bad signature/],
  ['changedRedelivery', 'redelivery', /conn-b1.*:2: redelivered .* with another body/],
  ['undercounted', 'counted', /conn-a1.*: its close \(n=\d+\) follows 5 events; the app never got 1 of them \(first seq 5, last 5\)/],
];

for (const [twist, check, says] of caught) {
  test(`caught: ${twist} (by "${CHECKS[check]}…")`, (t) => {
    const verdicts = checkWs(story({ [twist]: true }));
    const failing = verdicts.filter((v) => v.anomalies.length > 0).map((v) => v.check);
    t.deepEqual(failing, [verdict(verdicts, CHECKS[check]).check], 'only its own check fails');
    const anomalies = verdict(verdicts, CHECKS[check]).anomalies;
    t.is(anomalies.length, 1, anomalies.join('; '));
    t.regex(anomalies[0], says);
  });
}

test('a connection killed with its edge whose close never comes is caught twice: no close, and not in time', (t) => {
  const lines = story().filter((l) => !(l.op === 'callback' && l.conn_id === A2 && l.action === 'close'));
  const verdicts = checkWs(lines);
  t.deepEqual(verdict(verdicts, CHECKS.oneClose).anomalies.length, 1);
  t.regex(verdict(verdicts, CHECKS.late).anomalies.join(), /conn-a2.* on edge-1: kill -9 .* no close ever came/);
});

test('without the kill, the messages c3 lost are an anomaly, not the loss window', (t) => {
  const lines = story().filter((l) => !(l.kind === 'fault'));
  const anomalies = verdict(checkWs(lines), CHECKS.arrive).anomalies;
  t.is(anomalies.length, 1, anomalies.join('; '));
  t.regex(anomalies[0], /c3: 2 of 3 message\(s\) never delivered \(first 2/);
});

test('the bound is read from the run start line: peerDeadMs 20000 makes a 13 s close in time', (t) => {
  const lines = story({ lateClose: true }).map((l) => (l.op === 'start' ? { ...l, peerDeadMs: 20_000 } : l));
  const v = verdict(checkWs(lines), CHECKS.late);
  t.deepEqual(v.anomalies, []);
  t.is(v.checked, 1);
});

test('a drained edge may lose the tail in flight when it sent its close (1001), never a gap; a pause of another process excuses nothing', (t) => {
  const asDrain = (lines: HistoryLine[]) =>
    lines.map((l) => (l.kind === 'fault' && l.op === 'kill -9' ? { ...l, op: 'drain' } : l.kind === 'fault' && l.op === 'down' ? { ...l, kind: 'fault', fault: 'drain' } : l));
  t.deepEqual(verdict(checkWs(asDrain(story())), CHECKS.arrive).anomalies, [], 'the tail c3 sent while the close was on its way');
  const gap = verdict(checkWs(asDrain(story({ gap: true }))), CHECKS.arrive).anomalies;
  t.is(gap.length, 1, gap.join('; '));
  const elsewhere = story().map((l) => (l.kind === 'fault' ? { ...l, target: 'vault-1', roles: 'vault' } : l));
  t.is(verdict(checkWs(elsewhere), CHECKS.arrive).anomalies.length, 1, 'a fault of another process is no excuse');
});

test('a client whose connection the edge ended (4005 here) may have lost the tail it sent meanwhile, never a gap', (t) => {
  const broken = story({ lostMessage: true }).map((l) => (l.op === 'close' && l.client === 'c1' ? ({ ...l, op: 'break', phase: 'info', code: 4005 } as HistoryLine) : l));
  t.deepEqual(verdict(checkWs(broken), CHECKS.arrive).anomalies, [], 'ended under it with 4005: its unsent tail is excused');
  const abnormal = story({ lostMessage: true }).map((l) => (l.op === 'close' && l.client === 'c1' ? ({ ...l, op: 'break', phase: 'info', code: 1006 } as HistoryLine) : l));
  t.is(verdict(checkWs(abnormal), CHECKS.arrive).anomalies.length, 1, '1006 (the connection broke, no close from the edge) with no fault: an anomaly');
});

test('a client told 4003 (its edge fenced itself) is excused a lost tail only when a NATS node restarted under it; never a gap', (t) => {
  const with4003 = (lines: HistoryLine[], client: string) => lines.map((l) => (l.op === 'close' && l.phase === 'ok' && l.client === client ? { ...l, code: 4003 } : l));
  const live = verdict(checkWs(with4003(story({ lostMessage: true }), 'c1')), CHECKS.arrive).anomalies;
  t.is(live.length, 1, 'a live edge that fenced itself for no fault in the run lost c1\'s tail: caught');
  t.regex(live[0]!, /c1: 1 of 3 message\(s\) never delivered/);
  // The same, with a NATS node restarted (and the death bound after it) while c1 lived.
  const restarted = with4003(story({ lostMessage: true }), 'c1');
  restarted.splice(4, 0, { ...restarted[3], n: 3.5, kind: 'fault', phase: 'info', op: 'nats restart', id: 'fault-n', target: 'nats-1', downMs: 500 });
  t.deepEqual(verdict(checkWs(restarted), CHECKS.arrive).anomalies, [], 'fenced while its NATS node restarted: the tail is excused');
  t.is(verdict(checkWs(story({ lostMessage: true })), CHECKS.arrive).anomalies.length, 1, 'the same loss with 1000 is an anomaly');
  const noKill = story({ gap: true }).filter((l) => l.kind !== 'fault').map((l) => (l.op === 'break' && l.client === 'c3' ? { ...l, code: 4003 } : l));
  const gap = verdict(checkWs(noKill), CHECKS.arrive).anomalies;
  t.is(gap.length, 1, gap.join('; '));
  t.regex(gap[0]!, /c3: message 2 missing while later ones arrived/);
});

/** The story with edge-1's kill -9 as part of a power cut of every node (chaos/power-cut.ts), A2's close never coming. */
function powerCutStory(x: Twists = {}): HistoryLine[] {
  const out: HistoryLine[] = [];
  for (const l of story(x)) {
    if (l.op === 'callback' && l.conn_id === A2 && l.action === 'close') continue;
    if (l.kind === 'fault' && l.op === 'kill -9') out.push({ ...l, n: l.n - 0.5, op: 'power cut', target: 'every node' }, { ...l, cause: 'power cut' });
    else if (l.kind === 'fault' && l.op === 'healed') out.push(l, { ...l, n: l.n + 0.5, op: 'power on', target: 'every node' });
    else out.push(l);
  }
  return out;
}

test('a power cut of every node: the close of a connection open at the cut is counted as lost with it, not an anomaly', (t) => {
  const verdicts = checkWs(powerCutStory());
  t.deepEqual(verdicts.filter((v) => v.anomalies.length > 0).map((v) => `${v.check}: ${v.anomalies.join('; ')}`), []);
  t.truthy(verdicts.find((v) => v.check.includes('closes lost to power cuts: 1')), verdicts.map((v) => v.check).join(' | '));
  // Without the power cut line, the same history is the kill -9 whose close never came.
  const plain = powerCutStory().filter((l) => l.op !== 'power cut' && l.op !== 'power on');
  t.is(verdict(checkWs(plain), CHECKS.oneClose).anomalies.length, 1);
});

test('a power cut within the retry period after a client ended excuses its missing close (its edge may still have held it), not one later', (t) => {
  // c1 ended a few lines before the cut: its edge may still have held its close.
  t.deepEqual(verdict(checkWs(powerCutStory({ missingClose: true })), CHECKS.oneClose).anomalies, []);
  // The same cut 61 s later: the close was owed long before, and its absence is an anomaly.
  const lines = powerCutStory({ missingClose: true });
  const cutAt = lines.find((l) => l.op === 'power cut')!.n;
  const later = lines.map((l) => (l.n >= cutAt ? { ...l, t: l.t + 61_000 } : l));
  const anomalies = verdict(checkWs(later), CHECKS.oneClose).anomalies;
  t.is(anomalies.length, 1, anomalies.join('; '));
  t.regex(anomalies[0], /conn-a1.*: no close/);
});
