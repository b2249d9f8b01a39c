import test from 'ava';
import { checkWsRecovery } from '../../../chaos/checks/ws-recovery.js';
import type { HistoryLine } from '../../../chaos/history.js';
import type { Verdict } from '../../../chaos/workload.js';

// The recovery checker on synthetic histories: a history that keeps the history-and-recovery
// contract passes with exact counts; each way of breaking it is caught, by the checks that should.

const EPOCH = 'mf0abc-1a2b3c4d';
const CONN = 'aaaaaaaaaaaa.conn-c1-xxxxxxxxxxxxxx';

class Story {
  readonly lines: HistoryLine[] = [];
  private t = 1_700_000_000_000;
  private n = 0;
  private ids = 0;

  line(kind: string, phase: HistoryLine['phase'], op: string, fields: Record<string, unknown> = {}): this {
    this.t += 10;
    this.lines.push({ t: this.t, n: this.n++, kind, phase, op, id: `${kind}-${++this.ids}`, ...fields });
    return this;
  }

  /** A broadcast and its outcome: an offset for a kept one, 'unknown' or 'fail' otherwise. */
  send(pid: string, outcome: number | 'unknown' | 'fail' | 'not kept', epoch = EPOCH): this {
    const user = pid.split(':')[0];
    this.line('ws', 'invoke', 'broadcast', { user, pid });
    if (typeof outcome === 'number') return this.line('ws', 'ok', 'broadcast', { user, pid, delivered: 1, kept: true, offset: outcome, epoch });
    if (outcome === 'not kept') return this.line('ws', 'ok', 'broadcast', { user, pid, delivered: 1, kept: false });
    return this.line('ws', outcome, 'broadcast', { user, pid, ...(outcome === 'fail' ? { status: 400 } : { status: 503 }) });
  }

  connect(client: string, slot: number, user: string, recover: string): this {
    return this.line('ws', 'invoke', 'connect', { client, slot, user, recover }).line('ws', 'ok', 'connect', { client });
  }

  recovery(client: string, recovered: boolean, offset: number | null, missed: number, reason?: string, epoch: string | null = EPOCH): this {
    return this.line('ws', 'info', 'recovery', { client, recovered, epoch, offset, missed, ...(reason ? { reason } : {}) });
  }

  /** Frames: [offset, pid] each (offset null: none). */
  frames(client: string, ...frames: Array<[number | null, string]>): this {
    for (const [offset, pid] of frames) this.line('ws', 'info', 'frame', { client, ...(offset === null ? {} : { offset }), pid, user: pid.split(':')[0] });
    return this;
  }

  close(client: string): this {
    return this.line('ws', 'invoke', 'close', { client }).line('ws', 'ok', 'close', { client, code: 1000 });
  }
}

interface Twists {
  /** c2 gets 17 twice. */
  duplicate?: boolean;
  /** c2 (recovered: true from 12) never gets 17, while 20 arrives. */
  missing?: boolean;
  /** c2 gets 17 before 15. */
  reorder?: boolean;
  /** c5, bob's, gets alice's 12. */
  foreign?: boolean;
  /** c2 gets an offset no send gave. */
  fromNowhere?: boolean;
  /** c2 gets the refused send. */
  refused?: boolean;
  /** c1 never saw 12, yet c2 asked to recover from it. */
  skipped?: boolean;
  /** c2's recovery frame says missed 3 for a replay of 2. */
  missedWrong?: boolean;
  /** c2's recovery frame is in another epoch than asked, and says recovered. */
  otherEpoch?: boolean;
  /** An acknowledged send said not kept. */
  notKept?: boolean;
  /** An edge's log said history was off. */
  edgeOff?: boolean;
  /** c4's edge did not answer recover (no recovery frame, a raw frame). */
  raw?: boolean;
  /** The app's open callback for c1 says recovered: true. */
  openLies?: boolean;
  /** bob's send was kept through an edge that names the stream otherwise. */
  twoNames?: boolean;
}

/**
 * alice's browser (slot 0): c1 starts (new, at 9), sees 10 and 12, breaks; c2 recovers from 12
 * (missed 14, of a send of unknown outcome, and 15), sees 17 and 20 live, closes; c3 asks from 20
 * and is told gap (starts over at 21); c4 recovers from 21, nothing missed. bob's browser (slot 1):
 * c5 starts at 10, sees 11. Refused send 5 reaches nobody.
 */
function story(x: Twists = {}): HistoryLine[] {
  const s = new Story();
  s.line('run', 'info', 'start', { seed: 1, peerDeadMs: 2_000 });
  s.send('alice:s1:1', 10).send('bob:s1:1', 11, x.twoNames ? 'mf0abz-1a2b3c4d' : EPOCH).send('alice:s1:2', 12).send('alice:s1:3', 'unknown').send('alice:s1:4', 15).send('alice:s1:5', 'fail');
  s.send('alice:s1:6', 17).send('alice:s1:7', 20).send('alice:s1:8', x.notKept ? 'not kept' : 21);

  s.connect('c1', 0, 'alice', '').recovery('c1', false, 9, 0, 'new');
  s.line('ws', 'info', 'send', { client: 'c1', seq: 1 });
  const open = { recovery: x.openLies ? { recovered: true, since: null, offset: 9, missed: 0 } : { recovered: false, since: null, offset: 9, missed: 0, reason: 'new' } };
  s.line('ws', 'info', 'callback', { conn_id: CONN, action: 'open', data: open, event_id: `${CONN}:1`, seq: 1, sig_ok: true });
  s.line('ws', 'info', 'callback', { conn_id: CONN, action: 'message', data: { event: 'chaos', data: { client: 'c1', seq: 1 } }, event_id: `${CONN}:2`, seq: 2, sig_ok: true });
  s.frames('c1', [10, 'alice:s1:1'], ...(x.skipped ? [] : [[12, 'alice:s1:2'] as [number, string]]));
  s.line('ws', 'info', 'break', { client: 'c1', code: 1006, reason: '' });
  s.line('ws', 'info', 'callback', { conn_id: CONN, action: 'close', data: {}, event_id: `${CONN}:close`, seq: 3, sig_ok: true });

  s.connect('c2', 0, 'alice', `${EPOCH}:12`).recovery('c2', true, 15, x.missedWrong ? 3 : 2, undefined, x.otherEpoch ? 'mf0abd-1a2b3c4d' : EPOCH);
  const c2: Array<[number | null, string]> = [[14, 'alice:s1:3'], [15, 'alice:s1:4']];
  if (x.fromNowhere) c2.push([16, 'alice:s9:1']);
  if (x.refused) c2.push([null, 'alice:s1:5']);
  if (!x.missing) c2.push([17, 'alice:s1:6']);
  if (x.duplicate) c2.push([17, 'alice:s1:6']);
  c2.push([20, 'alice:s1:7']);
  if (x.reorder) [c2[1], c2[2]] = [c2[2], c2[1]];
  s.frames('c2', ...c2).close('c2');

  s.connect('c3', 0, 'alice', `${EPOCH}:20`).recovery('c3', false, 21, 0, 'gap').close('c3');
  s.connect('c4', 0, 'alice', `${EPOCH}:21`);
  if (x.raw) s.line('ws', 'info', 'frame', { client: 'c4', raw: true, pid: 'alice:s1:8', user: 'alice' });
  else s.recovery('c4', true, 21, 0);
  s.close('c4');

  s.connect('c5', 1, 'bob', '').recovery('c5', false, 10, 0, 'new').frames('c5', [11, 'bob:s1:1'], ...(x.foreign ? [[12, 'alice:s1:2'] as [number, string]] : [])).close('c5');

  s.line('process', 'info', 'edge log', { target: 'edge-1', starts: 2, historyOff: x.edgeOff ? 1 : 0 });
  s.line('process', 'info', 'edge log', { target: 'edge-2', starts: 1, historyOff: 0 });
  s.line('run', 'info', 'end', {});
  return s.lines;
}

const CHECKS = {
  shape: 'ws recovery: a recovering connection gets its recovery frame first',
  said: 'ws recovery: each recovery frame holds what it says',
  twice: 'ws recovery: no broadcast twice',
  order: 'ws recovery: offsets strictly increase',
  nowhere: 'ws recovery: nothing from nowhere',
  session: 'ws recovery: each connection gets every acknowledged send',
  life: "ws recovery: each browser's recovered connections",
  on: 'ws recovery: history is on',
  told: "ws recovery: the app's open callback",
  named: 'ws recovery: every edge names the history alike',
} as const;

function verdict(verdicts: Verdict[], prefix: string): Verdict {
  const v = verdicts.find((x) => x.check.startsWith(prefix));
  if (!v) throw new Error(`no verdict starting "${prefix}" in ${verdicts.map((x) => x.check).join(' | ')}`);
  return v;
}

test('recovery: a history that keeps the contract passes every check, with exact counts', (t) => {
  const verdicts = checkWsRecovery(story());
  t.deepEqual(
    verdicts.filter((v) => v.anomalies.length > 0).map((v) => `${v.check}: ${v.anomalies.join('; ')}`),
    [],
  );
  const counts = Object.fromEntries(Object.entries(CHECKS).map(([k, prefix]) => [k, verdict(verdicts, prefix).checked]));
  // 5 sessions heard from; 7 frames; c1 owes 10 and 12, c2 15, 17 and 20 (14 is of unknown outcome),
  // c5 11: 6 claims; alice's first life (c1, c2: 9..20) 5, her second (c3, c4: 21..21) none, bob's 1;
  // 7 acknowledged sends and 2 edge logs; one open callback to compare; 2 users' chains named.
  t.deepEqual(counts, { shape: 5, said: 5, twice: 7, order: 7, nowhere: 7, session: 6, life: 6, on: 9, told: 1, named: 2 });
  t.regex(verdict(verdicts, 'ws recovery: (info)').check, /sends kept 7, unknown 1, refused 1; recoveries: recovered 2, new 2, gap 1, epoch 0, unavailable 0, off 0; .*claims from 5 connections, 3 lives/);
});

/** Each twist, the checks that must catch it (and no other), and what the first anomaly says. */
const caught: Array<[keyof Twists, Array<keyof typeof CHECKS>, RegExp]> = [
  ['duplicate', ['twice'], /c2: alice:s1:6 arrived twice/],
  ['missing', ['session', 'life'], /c2 \(alice, recovered from 12, saw up to 20\): 1 of 3 acknowledged send\(s\) never arrived, first offset 17 \(alice:s1:6\)/],
  ['reorder', ['order'], /c2: offset 15 \(alice:s1:4, n=\d+\) after 17/],
  ['foreign', ['nowhere'], /c5 n=\d+: alice:s1:2 \(alice's\) reached a client of bob at offset 12/],
  ['fromNowhere', ['nowhere'], /c2 n=\d+: alice:s9:1 at offset 16 was never sent/],
  ['refused', ['nowhere'], /c2 n=\d+: alice:s1:5 arrived though its send was refused/],
  ['skipped', ['life'], /slot 0, sessions c1,c2 \(alice, 9\.\.20\): 1 acknowledged send\(s\) reached none of them, first offset 12/],
  ['missedWrong', ['said'], /c2 \(asked mf0abc-1a2b3c4d:12, n=\d+\): missed 3, and 2 frame\(s\) came up to its offset 15/],
  ['otherEpoch', ['said', 'named'], /c2 .*: recovered: true in epoch mf0abd-1a2b3c4d/],
  ['notKept', ['on'], /alice:s1:8: acknowledged with kept false/],
  ['edgeOff', ['on'], /edge-1: said "gateway history: off" 1 time\(s\) in 2 start\(s\)/],
  ['raw', ['shape'], /c4: the edge did not answer recover=mf0abc-1a2b3c4d:21 with a recovery frame/],
  ['openLies', ['told'], /c1 on .*: the open callback said .*"recovered":true/],
  ['twoNames', ['named'], /bob \(install 1a2b3c4d\): 2 epochs \(mf0abz-1a2b3c4d, first by bob:s1:1; mf0abc-1a2b3c4d, first by c5's recovery frame\)/],
];

for (const [twist, checks, says] of caught) {
  test(`recovery: caught: ${twist} (by ${checks.join(' and ')})`, (t) => {
    const verdicts = checkWsRecovery(story({ [twist]: true }));
    const failing = verdicts.filter((v) => v.anomalies.length > 0).map((v) => v.check);
    t.deepEqual(failing, checks.map((c) => verdict(verdicts, CHECKS[c]).check), 'only these checks fail');
    const anomalies = verdict(verdicts, CHECKS[checks[0]]).anomalies;
    t.is(anomalies.length, 1, anomalies.join('; '));
    t.regex(anomalies[0], says);
  });
}

test('recovery: a send of unknown outcome may be delivered, under one offset; a frame claiming a kept send at another offset may not', (t) => {
  t.deepEqual(verdict(checkWsRecovery(story()), CHECKS.nowhere).anomalies, [], 'alice:s1:3 (unknown) arrived at 14');
  const moved = story().map((l) => (l.op === 'frame' && l.pid === 'alice:s1:4' ? { ...l, offset: 16 } : l));
  const anomalies = verdict(checkWsRecovery(moved), CHECKS.nowhere).anomalies;
  t.regex(anomalies.join('\n'), /c2 n=\d+: alice:s1:4 arrived at offset 16, kept at 15/);
});

test('recovery: a recovery that answered false owes nothing between the position asked and its offset; one that answered true does', (t) => {
  // c3 asked from 20 and was told gap at 21: alice:s1:8 (21) never reaches it, and that is no anomaly.
  t.deepEqual(checkWsRecovery(story()).filter((v) => v.anomalies.length > 0).map((v) => v.check), []);
  // Told recovered (missed 1) and closed cleanly with nothing: 21 was owed.
  const told = story().map((l) => (l.op === 'recovery' && l.client === 'c3' ? { ...l, recovered: true, missed: 1, reason: undefined } : l));
  const verdicts = checkWsRecovery(told);
  t.regex(verdict(verdicts, CHECKS.session).anomalies.join('\n'), /c3 \(alice, recovered from 20, saw up to 21\): 1 of 1 acknowledged send\(s\) never arrived, first offset 21/);
  t.regex(verdict(verdicts, CHECKS.said).anomalies.join('\n'), /c3 .*: missed 1, and 0 frame\(s\) came up to its offset 21/);
});

test('recovery: gap and unavailable answers are counted, not anomalies; unavailable without a position is allowed', (t) => {
  const lines = story().map((l) => (l.op === 'recovery' && l.client === 'c5' ? { ...l, reason: 'unavailable', epoch: null, offset: null } : l));
  const verdicts = checkWsRecovery(lines);
  t.deepEqual(verdicts.filter((v) => v.anomalies.length > 0).map((v) => `${v.check}: ${v.anomalies.join('; ')}`), []);
  t.regex(verdict(verdicts, 'ws recovery: (info)').check, /gap 1, epoch 0, unavailable 1/);
  // Without a position, c5's frame claims nothing: bob's 11 is owed to nobody.
  t.is(verdict(verdicts, CHECKS.session).checked, 5);
});

test('recovery: during a rolling upgrade an old edge may ignore recover, and sends may go unkept', (t) => {
  const lines = [{ t: 0, n: -1, kind: 'upgrade', phase: 'info', op: 'step', id: 'u1' } as HistoryLine, ...story({ raw: true, notKept: true })];
  const verdicts = checkWsRecovery(lines);
  t.deepEqual(verdicts.filter((v) => v.anomalies.length > 0).map((v) => `${v.check}: ${v.anomalies.join('; ')}`), []);
  t.false(verdicts.some((v) => v.check.startsWith(CHECKS.on)), 'history may be off on old edges');
});
