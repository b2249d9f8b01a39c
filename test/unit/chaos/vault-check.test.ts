import test from 'ava';
import { checkVault } from '../../../chaos/checks/vault.js';
import type { HistoryLine, Phase } from '../../../chaos/history.js';
import type { Verdict } from '../../../chaos/workload.js';

/** A synthetic history, written in order: each line one step later (`n`) and 10 ms later (`t`). */
class Synthetic {
  readonly lines: HistoryLine[] = [];
  private ops = new Map<string, string>();
  private ids = 0;
  private t = 1_000_000;

  private line(phase: Phase, op: string, id: string, fields: Record<string, unknown>): void {
    this.t += 10;
    this.lines.push({ t: this.t, n: this.lines.length, kind: 'vault', phase, op, id, ...fields });
  }

  invoke(op: string, fields: Record<string, unknown> = {}): string {
    const id = `vault-${++this.ids}`;
    this.ops.set(id, op);
    this.line('invoke', op, id, fields);
    return id;
  }

  end(phase: 'ok' | 'fail' | 'unknown', id: string, fields: Record<string, unknown> = {}): void {
    this.line(phase, this.ops.get(id)!, id, fields);
  }

  /** An operation invoked and answered before the next one starts. */
  done(op: string, fields: Record<string, unknown>, phase: 'ok' | 'fail' | 'unknown' = 'ok', result: Record<string, unknown> = {}): string {
    const id = this.invoke(op, fields);
    this.end(phase, id, result);
    return id;
  }

  final(key: string, result: Record<string, unknown>): void {
    this.done('read', { key, final: true }, 'ok', result);
  }
}

/** Anomalies per check (by the check's first words), so a test names exactly what must be found. */
function found(verdicts: Verdict[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of verdicts) if (v.anomalies.length > 0) out[v.check.replace(/^vault: /, '').split(' ').slice(0, 3).join(' ')] = v.anomalies.length;
  return out;
}

function checked(verdicts: Verdict[]): number[] {
  return verdicts.map((v) => v.checked);
}

/** A history every promise holds in: overlaps, unknowns, refusals, lists, a check-and-set. */
function good(): Synthetic {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'k00=1' }, 'ok', { version: 1 });
  h.done('read', { key: 'k00' }, 'ok', { value: 'k00=1', version: 1 });
  h.done('create', { key: 'k00', value: 'k00=2' }, 'fail', { status: 409 });
  // An update and a read overlapping: the read may see either value.
  const u = h.invoke('update', { key: 'k00', value: 'k00=3' });
  const r = h.invoke('read', { key: 'k00' });
  h.end('ok', r, { value: 'k00=1', version: 1 });
  h.end('ok', u, { version: 2 });
  h.done('list', {}, 'ok', { values: { k00: 'k00=3' } });
  // Check-and-set from the version a read saw; a second one from the same version is refused.
  h.done('update', { key: 'k00', value: 'k00=4', version: 2, base: 'k00=3' }, 'ok', { version: 3 });
  h.done('update', { key: 'k00', value: 'k00=5', version: 2, base: 'k00=3' }, 'fail', { status: 409 });
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('read', { key: 'k00' }, 'ok', { absent: true });
  h.done('list', {}, 'ok', { values: {} });
  // An unknown write may land: the final read sees it.
  h.done('create', { key: 'k00', value: 'k00=6' }, 'unknown', { error: 'timeout' });
  // k01: written, deleted with an unknown outcome: absent or present at the end are both right.
  h.done('create', { key: 'k01', value: 'k01=7' }, 'ok', { version: 1 });
  h.done('delete', { key: 'k01' }, 'unknown', { status: 503 });
  h.final('k00', { value: 'k00=6', version: 1 });
  h.final('k01', { absent: true });
  return h;
}

test('a history where every promise holds passes every check, and each check looked at something', (t) => {
  const verdicts = checkVault(good().lines);
  t.deepEqual(found(verdicts), {});
  t.deepEqual(checked(verdicts), [4, 1, 7, 9, 1, 5, 2]);
});

test('an unknown delete may also not have happened: the value at the end is right too', (t) => {
  const h = good();
  h.lines.pop();
  h.final('k01', { value: 'k01=7', version: 1 });
  t.deepEqual(found(checkVault(h.lines)), {});
});

test('a lost write: the final read shows a value an acknowledged update overwrote', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('update', { key: 'k00', value: 'b' }, 'ok');
  h.final('k00', { value: 'a' });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'every acknowledged write': 1 });
  t.regex(verdicts[0].anomalies[0], /lost write: final vault-\d+ read k00 = "a" .*vault-2 \(= "b"/);
});

test('a lost write: the key is absent at the end though an acknowledged create was never deleted', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('delete', { key: 'k00' }, 'fail', { status: 404 });
  h.final('k00', { absent: true });
  t.deepEqual(found(checkVault(h.lines)), { 'every acknowledged write': 1 });
});

test('a resurrection: the value is back after an acknowledged delete with no write after it', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('delete', { key: 'k00' }, 'ok');
  h.final('k00', { value: 'a' });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'no resurrection after': 1 });
  t.regex(verdicts[1].anomalies[0], /^resurrection: /);
});

test('a stale read: a read invoked after an acknowledged update returns the value before it', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('update', { key: 'k00', value: 'b' }, 'ok');
  h.done('read', { key: 'k00' }, 'ok', { value: 'a' });
  h.final('k00', { value: 'b' });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'no stale read': 1 });
  t.regex(verdicts[2].anomalies[0], /^stale read: vault-3 read k00 = "a"/);
});

test('a stale read: absent after an acknowledged create (by a read and by a list)', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('read', { key: 'k00' }, 'ok', { absent: true });
  h.done('list', {}, 'ok', { values: {} });
  h.final('k00', { value: 'a' });
  t.deepEqual(found(checkVault(h.lines)), { 'no stale read': 2 });
});

test('a stale read: a deleted value seen by a list after the delete was acknowledged', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('list', {}, 'ok', { values: { k00: 'a' } });
  h.final('k00', { absent: true });
  t.deepEqual(found(checkVault(h.lines)), { 'no stale read': 1 });
});

test('a value never written, and a value only a refused write carried, are both caught', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('read', { key: 'k00' }, 'ok', { value: 'zzz' });
  h.done('update', { key: 'k00', value: 'b' }, 'fail', { status: 401 });
  h.final('k00', { value: 'b' });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'every value read': 2 });
  t.regex(verdicts[3].anomalies.join('\n'), /read k00 = "zzz", a value no write/);
});

test('a read cannot see a write invoked only after the read was answered', (t) => {
  const h = new Synthetic();
  h.done('read', { key: 'k00' }, 'ok', { value: 'later' });
  h.done('create', { key: 'k00', value: 'later' }, 'ok');
  h.final('k00', { value: 'later' });
  t.deepEqual(found(checkVault(h.lines)), { 'every value read': 1 });
});

test('two check-and-set updates acknowledged from one version are caught; a delete between them excuses them', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('update', { key: 'k00', value: 'b', version: 1, base: 'a' }, 'ok', { version: 2 });
  h.done('update', { key: 'k00', value: 'c', version: 1, base: 'a' }, 'ok', { version: 2 });
  h.final('k00', { value: 'c' });
  t.deepEqual(found(checkVault(h.lines)), { 'check-and-set never succeeds': 1 });

  const excused = new Synthetic();
  excused.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  excused.done('update', { key: 'k00', value: 'b', version: 1, base: 'a' }, 'ok', { version: 2 });
  excused.done('delete', { key: 'k00' }, 'unknown');
  excused.done('update', { key: 'k00', value: 'c', version: 1, base: 'a' }, 'ok', { version: 2 });
  excused.final('k00', { value: 'c' });
  t.deepEqual(found(checkVault(excused.lines)), {});
});

test('a key whose final read never got an answer, and a run with no acknowledged write, fail', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'unknown');
  h.done('read', { key: 'k00', final: true }, 'unknown', { error: 'timeout' });
  t.deepEqual(found(checkVault(h.lines)), { 'every acknowledged write': 1, 'every key answered': 1 });
});

test('a create acknowledged on a key an acknowledged write had set (no delete between) is caught', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok');
  h.done('update', { key: 'k00', value: 'b' }, 'ok');
  h.done('delete', { key: 'k00' }, 'fail', { status: 404 });
  h.done('create', { key: 'k00', value: 'c' }, 'ok');
  h.final('k00', { value: 'c' });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'creates succeed only': 1 });
  t.regex(verdicts[5].anomalies[0], /^vault-4: create of k00 = "c" acknowledged .* though vault-2 \(= "b"/);
});

test('an update or delete acknowledged on a key never created, or deleted for sure, is caught; an unknown create excuses it', (t) => {
  const h = new Synthetic();
  h.done('update', { key: 'k00', value: 'a' }, 'ok');
  h.done('create', { key: 'k01', value: 'b' }, 'ok');
  h.done('delete', { key: 'k01' }, 'ok');
  h.done('delete', { key: 'k01' }, 'ok');
  h.final('k00', { value: 'a' });
  h.final('k01', { absent: true });
  t.deepEqual(found(checkVault(h.lines)), { 'creates succeed only': 2 });

  const excused = new Synthetic();
  excused.done('create', { key: 'k00', value: 'a' }, 'unknown');
  excused.done('update', { key: 'k00', value: 'b' }, 'ok');
  excused.final('k00', { value: 'b' });
  t.deepEqual(found(checkVault(excused.lines)), {});
});

/** Versions: restores, version reads, undeletes and destroys where every promise holds. */
function goodWithVersions(): Synthetic {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('update', { key: 'k00', value: 'b' }, 'ok', { version: 2 });
  h.done('readVersion', { key: 'k00', version: 1 }, 'ok', { value: 'a', version: 1 });
  // A restore of version 1: the older value is read back (without the restore, a stale read).
  h.done('restore', { key: 'k00', version: 1 }, 'ok', { version: 3 });
  h.done('read', { key: 'k00' }, 'ok', { value: 'a', version: 3 });
  h.done('list', {}, 'ok', { values: { k00: 'a' } });
  h.done('restore', { key: 'k00', version: 3 }, 'fail', { status: 409 });
  // Version 2 destroyed: not kept any more.
  h.done('destroy', { key: 'k00', version: 2 }, 'ok', { destroyed: [2] });
  h.done('readVersion', { key: 'k00', version: 2 }, 'ok', { absent: true });
  // Deleted, undeleted: present again (its value from before), until the next delete.
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('read', { key: 'k00' }, 'ok', { absent: true });
  h.done('undelete', { key: 'k00' }, 'ok', { version: 3 });
  h.done('read', { key: 'k00' }, 'ok', { value: 'a', version: 3 });
  h.done('undelete', { key: 'k00' }, 'fail', { status: 404 });
  // Deleted again and destroyed whole: nothing to undelete, a create starts afresh.
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('destroy', { key: 'k00' }, 'ok', { destroyed: [1, 3] });
  h.done('undelete', { key: 'k00' }, 'fail', { status: 404 });
  h.done('create', { key: 'k00', value: 'c' }, 'ok', { version: 1 });
  // An unknown restore may have landed: the final read may show any value written before it.
  h.done('update', { key: 'k00', value: 'd' }, 'ok', { version: 2 });
  h.done('restore', { key: 'k00', version: 1 }, 'unknown', { status: 503 });
  h.final('k00', { value: 'c', version: 3 });
  return h;
}

test('versions: a history where every promise holds passes every check, the two on versions included', (t) => {
  const verdicts = checkVault(goodWithVersions().lines);
  t.deepEqual(found(verdicts), {});
  t.deepEqual(checked(verdicts), [4, 2, 4, 6, 0, 8, 1, 1, 1]);
  t.deepEqual(
    verdicts.slice(7).map((v) => v.check),
    ['vault: no destroyed version is read back', 'vault: no undelete of a deleted secret destroyed whole'],
  );
});

test('versions: after a restore, a value never written to the key is still caught, by a read and by a version read', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('update', { key: 'k00', value: 'b' }, 'ok', { version: 2 });
  h.done('restore', { key: 'k00', version: 1 }, 'ok', { version: 3 });
  h.done('read', { key: 'k00' }, 'ok', { value: 'zzz', version: 3 });
  h.done('readVersion', { key: 'k00', version: 2 }, 'ok', { value: 'k01=9', version: 2 });
  h.done('create', { key: 'k01', value: 'k01=9' }, 'ok', { version: 1 });
  h.final('k00', { value: 'a', version: 3 });
  h.final('k01', { value: 'k01=9', version: 1 });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'every value read': 2 });
  t.regex(verdicts[3].anomalies[0], /vault-4 read k00 = "zzz", a value no write/);
  t.regex(verdicts[3].anomalies[1], /vault-5 read version 2 of k00 = "k01=9", a value no write/);
});

test('versions: a restore answered before an acknowledged update does not excuse reading past that update', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('update', { key: 'k00', value: 'b' }, 'ok', { version: 2 });
  h.done('restore', { key: 'k00', version: 1 }, 'ok', { version: 3 });
  h.done('update', { key: 'k00', value: 'c' }, 'ok', { version: 4 });
  h.done('read', { key: 'k00' }, 'ok', { value: 'a', version: 3 });
  h.final('k00', { value: 'c', version: 4 });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'no stale read': 1 });
  t.regex(verdicts[2].anomalies[0], /^stale read: vault-5 read k00 = "a" \(written by vault-1\/vault-3\), but vault-4 \(= "c"/);
});

test('versions: a version read back after its destroy was acknowledged is caught; a create between (a new generation) excuses it', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('update', { key: 'k00', value: 'b' }, 'ok', { version: 2 });
  h.done('destroy', { key: 'k00', version: 1 }, 'ok', { destroyed: [1] });
  h.done('readVersion', { key: 'k00', version: 1 }, 'ok', { value: 'a', version: 1 });
  h.final('k00', { value: 'b', version: 2 });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'no destroyed version': 1 });
  t.regex(verdicts[7].anomalies[0], /^vault-4 read version 1 of k00 = "a", though vault-3 destroyed it/);

  const excused = new Synthetic();
  excused.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  excused.done('update', { key: 'k00', value: 'b' }, 'ok', { version: 2 });
  excused.done('destroy', { key: 'k00', version: 1 }, 'ok', { destroyed: [1] });
  excused.done('delete', { key: 'k00' }, 'ok');
  excused.done('create', { key: 'k00', value: 'c' }, 'ok', { version: 1 });
  excused.done('readVersion', { key: 'k00', version: 1 }, 'ok', { value: 'c', version: 1 });
  excused.final('k00', { value: 'c', version: 1 });
  t.deepEqual(found(checkVault(excused.lines)), {});
});

test('versions: an undelete acknowledged after the deleted secret was destroyed whole is caught; a delete between excuses it', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('destroy', { key: 'k00' }, 'ok', { destroyed: [1] });
  h.done('undelete', { key: 'k00' }, 'ok', { version: 1 });
  h.final('k00', { value: 'a', version: 1 });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'no undelete of': 1 });
  t.regex(verdicts[8].anomalies[0], /^vault-4: undelete of k00 acknowledged \(n=7\) though vault-3 destroyed its deleted copy whole/);

  const excused = new Synthetic();
  excused.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  excused.done('delete', { key: 'k00' }, 'ok');
  excused.done('destroy', { key: 'k00' }, 'ok', { destroyed: [1] });
  excused.done('create', { key: 'k00', value: 'b' }, 'ok', { version: 1 });
  excused.done('delete', { key: 'k00' }, 'unknown', { error: 'timeout' });
  excused.done('undelete', { key: 'k00' }, 'ok', { version: 1 });
  excused.final('k00', { value: 'b', version: 1 });
  t.deepEqual(found(checkVault(excused.lines)), {});
});

test('versions: after an acknowledged undelete the key is present until the next delete (a read, a list and the final read)', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('delete', { key: 'k00' }, 'ok');
  h.done('undelete', { key: 'k00' }, 'ok', { version: 1 });
  h.done('read', { key: 'k00' }, 'ok', { absent: true });
  h.done('list', {}, 'ok', { values: {} });
  h.final('k00', { absent: true });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'every acknowledged write': 1, 'no stale read': 2 });
  t.regex(verdicts[0].anomalies[0], /lost write: final vault-6 read k00 = absent .*vault-3 \(undelete of an earlier value/);
});

test('versions: an undelete acknowledged while the key was surely present, and a restore while it was surely absent, are caught', (t) => {
  const h = new Synthetic();
  h.done('create', { key: 'k00', value: 'a' }, 'ok', { version: 1 });
  h.done('undelete', { key: 'k00' }, 'ok', { version: 1 });
  h.done('create', { key: 'k01', value: 'b' }, 'ok', { version: 1 });
  h.done('update', { key: 'k01', value: 'c' }, 'ok', { version: 2 });
  h.done('delete', { key: 'k01' }, 'ok');
  h.done('restore', { key: 'k01', version: 1 }, 'ok', { version: 3 });
  h.final('k00', { value: 'a', version: 1 });
  h.final('k01', { absent: true });
  const verdicts = checkVault(h.lines);
  t.deepEqual(found(verdicts), { 'creates succeed only': 2, 'every acknowledged write': 1 });
  t.regex(verdicts[5].anomalies.join('\n'), /vault-2: undelete of k00 acknowledged .* though vault-1 \(= "a"/);
  t.regex(verdicts[5].anomalies.join('\n'), /vault-6: restore of k01 acknowledged .* though it was absent \(vault-5/);
});
