import test from 'ava';
import { checkUsers } from '../../../chaos/checks/users.js';
import type { HistoryLine, Phase } from '../../../chaos/history.js';
import type { Verdict } from '../../../chaos/workload.js';

/** A synthetic history: `wait` moves the clock; each line is one step later in `n`. */
class Synthetic {
  readonly lines: HistoryLine[] = [];
  private ops = new Map<string, string>();
  private ids = 0;
  t = 1_000_000;

  wait(ms: number): this {
    this.t += ms;
    return this;
  }

  private line(phase: Phase, op: string, id: string, fields: Record<string, unknown>): void {
    this.lines.push({ t: this.t, n: this.lines.length, kind: 'users', phase, op, id, ...fields });
  }

  invoke(op: string, fields: Record<string, unknown> = {}): string {
    const id = `users-${++this.ids}`;
    this.ops.set(id, op);
    this.line('invoke', op, id, fields);
    return id;
  }

  end(phase: 'ok' | 'fail' | 'unknown', id: string, fields: Record<string, unknown> = {}): void {
    this.line(phase, this.ops.get(id)!, id, fields);
  }

  done(op: string, fields: Record<string, unknown>, phase: 'ok' | 'fail' | 'unknown' = 'ok', result: Record<string, unknown> = {}): string {
    const id = this.invoke(op, fields);
    this.wait(5);
    this.end(phase, id, result);
    return id;
  }

  accepted(op: 'probe' | 'access probe' | 'old key', fields: Record<string, unknown>): string {
    return this.done(op, fields, 'ok', { status: 404, accepted: true });
  }

  refused(op: 'probe' | 'access probe' | 'old key', fields: Record<string, unknown>): string {
    return this.done(op, fields, 'fail', { status: 401 });
  }
}

function found(verdicts: Verdict[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of verdicts) if (v.anomalies.length > 0) out[v.check.replace(/^users: /, '').split(' ').slice(0, 3).join(' ')] = v.anomalies.length;
  return out;
}

const A = { user: 'u', token: 'tokA' };
const B = { user: 'u', token: 'tokB' };
const APP = { user: 'u', app: 'churn0', install: 'u/churn0#1' };
const ACCESS = { ...APP, access: 'acc1' };

/** Every promise held: revoked tokens refused past the bound (accepted within it), live ones accepted. */
function good(): Synthetic {
  const h = new Synthetic();
  h.done('user add', { user: 'u' }, 'ok', { token: 'tokA' });
  h.wait(1_100).accepted('probe', A);
  h.done('revoke', { user: 'u' });
  h.wait(500).accepted('probe', A); // within the bound: either answer is right
  h.wait(600).refused('probe', A);
  h.done('token', { user: 'u' }, 'ok', { token: 'tokB' });
  h.wait(1_100).accepted('probe', B);
  h.refused('probe', A);
  // An app: installed, an access token, accepted; uninstalled, refused past the bound, its key too.
  h.done('install', APP);
  h.wait(1_500).done('access', APP, 'ok', { access: 'acc1' });
  h.wait(1_100).accepted('access probe', ACCESS);
  h.done('uninstall', { user: 'u', app: 'churn0' });
  h.wait(300).accepted('access probe', ACCESS); // within the bound
  h.wait(800).refused('access probe', ACCESS);
  h.refused('old key', APP);
  // Reinstalled: the old token stays refused.
  h.done('install', { ...APP, install: 'u/churn0#2' });
  h.wait(2_000).refused('access probe', ACCESS);
  return h;
}

test('a history where every promise holds passes, and each check looked at something', (t) => {
  const verdicts = checkUsers(good().lines);
  t.deepEqual(found(verdicts), {});
  t.deepEqual(
    verdicts.map((v) => v.checked),
    [2, 3, 3],
  );
});

test('a revoked token accepted more than 1 s after the revocation was acknowledged is caught', (t) => {
  const h = good();
  h.wait(1_200).accepted('probe', A);
  const verdicts = checkUsers(h.lines);
  t.deepEqual(found(verdicts), { 'a revoked user': 1 });
  t.regex(verdicts[0].anomalies[0], /token tokA of u accepted \d+ ms after revocation users-\d+ was acknowledged/);
});

test('the bound is measured from the acknowledgement: a probe 1.2 s after the revoke was invoked but 0.2 s after its answer is not judged', (t) => {
  const h = new Synthetic();
  h.done('user add', { user: 'u' }, 'ok', { token: 'tokA' });
  const r = h.invoke('revoke', { user: 'u' });
  h.wait(1_000).end('ok', r);
  h.wait(200).accepted('probe', A);
  t.is(checkUsers(h.lines)[0].checked, 0);
});

test('a token issued after the revocation is not revoked by it; a live token refused is caught', (t) => {
  const h = good();
  h.wait(1_100).refused('probe', B);
  t.deepEqual(found(checkUsers(h.lines)), { 'live user and': 1 });
});

test('a revocation with an unknown outcome may have killed the token: its refusal is not an anomaly', (t) => {
  const h = good();
  h.done('revoke', { user: 'u' }, 'unknown', { error: 'timeout' });
  h.wait(1_100).refused('probe', B);
  t.deepEqual(found(checkUsers(h.lines)), {});
});

test("an uninstalled app's access token accepted past the bound is caught, and so is its key", (t) => {
  const h = good();
  h.wait(100).accepted('access probe', ACCESS);
  h.done('old key', APP, 'ok', { accepted: true });
  const verdicts = checkUsers(h.lines);
  t.deepEqual(found(verdicts), { "an uninstalled app's": 2 });
  t.regex(verdicts[1].anomalies.join('\n'), /access token acc1 of u\/churn0#1 accepted \d+ ms after uninstall/);
  t.regex(verdicts[1].anomalies.join('\n'), /key of u\/churn0#1 got an access token/);
});

test('a live access token refused is caught', (t) => {
  const h = new Synthetic();
  h.done('user add', { user: 'u' }, 'ok', { token: 'tokA' });
  h.done('install', APP);
  h.done('access', APP, 'ok', { access: 'acc1' });
  h.wait(1_500).refused('access probe', ACCESS);
  t.deepEqual(found(checkUsers(h.lines)), { 'a revoked user': 1, "an uninstalled app's": 1, 'live user and': 1 });
  t.regex(checkUsers(h.lines)[2].anomalies[0], /access token acc1 .* refused/);
});

test('a run that probed nothing past any bound fails its checks rather than passing them empty', (t) => {
  const h = new Synthetic();
  h.done('user add', { user: 'u' }, 'ok', { token: 'tokA' });
  t.deepEqual(found(checkUsers(h.lines)), { 'a revoked user': 1, "an uninstalled app's": 1, 'live user and': 1 });
});
