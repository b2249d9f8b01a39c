import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/**
 * The vault's promises, judged from the history alone (kind `vault`, see workloads/vault.ts).
 *
 * Model: each key is a register. A write is `create`/`update` (sets a unique value) or `delete` (sets
 * "absent"); a refused write (`fail`) had no effect; an `unknown` one may have taken effect at any
 * time after its invocation. Order is the history's `n`: `a` definitely precedes `b` when `a` was
 * acknowledged before `b` was invoked. The state a read saw is explained by a write that set it
 * (for "absent": the initial state or a delete). A read is consistent when some explaining write,
 * invoked before the read answered, is not definitely followed by a write acknowledged before the
 * read was invoked. The final reads (settle) are judged the same way against every acknowledged
 * write: a failure there is a lost write (a value overwritten by nothing later) or a resurrection
 * (a value back after an acknowledged delete).
 *
 * Versions. A `restore` and an `undelete` are writes too, of a value not named: "some value written
 * to that key before" (a restore copies an earlier version's value, an undelete brings back the one
 * the key had when deleted; neither invents one). So a read may be explained by one of them when its
 * value was written (by a create or update not refused) before that restore or undelete answered,
 * and the rest of the model holds as before: after an acknowledged restore or undelete the key is
 * present until a delete, and a later acknowledged write still hides what came before. A key never
 * restored nor undeleted is judged exactly as without versions. A `readVersion` is not a read of the
 * register (it reads one earlier version): its value must only have been written to that key. Two
 * promises of destroy: a version destroyed (answered ok) is not read back, unless a create that can
 * come after the destroy started a new generation (the only way a version number comes again); a
 * deleted secret destroyed whole is not undeleted, unless a delete that can come after the destroy
 * made a new deleted copy. The verdicts on versions are reported when the history has any of their
 * operations (a history without them reads as it always did).
 */

const KIND = 'vault';

interface Op {
  id: string;
  op: string;
  key?: string;
  value?: string;
  version?: number;
  base?: string;
  final: boolean;
  invokeN: number;
  /** `n` of the outcome; Infinity when unknown or missing (it may still take effect). */
  okN: number;
  outcome: 'ok' | 'fail' | 'unknown';
  result: HistoryLine | null;
}

interface Write {
  id: string;
  /** `earlier`: a restore or undelete, which sets some value written before it (not named). */
  kind: 'put' | 'delete' | 'initial' | 'earlier';
  op?: string;
  value?: string;
  invokeN: number;
  okN: number;
  acked: boolean;
}

const INITIAL: Write = { id: 'initial state', kind: 'initial', invokeN: -1, okN: -1, acked: true };

function collect(lines: readonly HistoryLine[]): Op[] {
  const ops = new Map<string, Op>();
  for (const l of lines) {
    if (l.kind !== KIND || l.phase === 'info') continue;
    if (l.phase === 'invoke') {
      ops.set(l.id, {
        id: l.id,
        op: l.op,
        key: l.key as string | undefined,
        value: l.value as string | undefined,
        version: l.version as number | undefined,
        base: l.base as string | undefined,
        final: l.final === true,
        invokeN: l.n,
        okN: Infinity,
        outcome: 'unknown',
        result: null,
      });
      continue;
    }
    const o = ops.get(l.id);
    if (!o) continue;
    o.outcome = l.phase as Op['outcome'];
    o.result = l;
    if (l.phase === 'ok') o.okN = l.n;
  }
  return [...ops.values()];
}

const KINDS: Record<string, Write['kind']> = { create: 'put', update: 'put', delete: 'delete', restore: 'earlier', undelete: 'earlier' };

/** The operations on versions: their verdicts are reported only when the history has one. */
const VERSION_OPS = ['restore', 'readVersion', 'undelete', 'destroy'];

/** A write's effect, unless it was refused. */
function writesByKey(ops: Op[]): Map<string, Write[]> {
  const out = new Map<string, Write[]>();
  for (const o of ops) {
    if (o.key === undefined || o.outcome === 'fail' || !(o.op in KINDS)) continue;
    const w: Write = { id: o.id, kind: KINDS[o.op], op: o.op, value: o.op === 'create' || o.op === 'update' ? o.value : undefined, invokeN: o.invokeN, okN: o.okN, acked: o.outcome === 'ok' };
    out.set(o.key, [...(out.get(o.key) ?? []), w]);
  }
  return out;
}

/** What one read saw of one key. */
interface Observation {
  readId: string;
  key: string;
  absent: boolean;
  value?: string;
  invokeN: number;
  okN: number;
  final: boolean;
}

function observations(ops: Op[]): Observation[] {
  const out: Observation[] = [];
  for (const o of ops) {
    if (o.outcome !== 'ok' || !o.result) continue;
    if (o.op === 'read' && o.key !== undefined) {
      const absent = o.result.absent === true;
      out.push({ readId: o.id, key: o.key, absent, value: absent ? undefined : String(o.result.value), invokeN: o.invokeN, okN: o.okN, final: o.final });
    } else if (o.op === 'list') {
      const values = (o.result.values ?? {}) as Record<string, string>;
      out.push(...Object.entries(values).map(([key, value]) => ({ readId: o.id, key, absent: false, value, invokeN: o.invokeN, okN: o.okN, final: false })));
    }
  }
  return out;
}

/** Keys a list saw as absent: every key written anywhere in the history that is not in the list. */
function listAbsences(ops: Op[], keys: Set<string>): Observation[] {
  const out: Observation[] = [];
  for (const o of ops) {
    if (o.op !== 'list' || o.outcome !== 'ok' || !o.result) continue;
    const values = (o.result.values ?? {}) as Record<string, string>;
    for (const key of keys) if (!(key in values)) out.push({ readId: o.id, key, absent: true, invokeN: o.invokeN, okN: o.okN, final: false });
  }
  return out;
}

type Judgement = { ok: true } | { ok: false; kind: 'never written' | 'stale' | 'lost write' | 'resurrection'; detail: string };

const show = (o: Observation) => (o.absent ? 'absent' : JSON.stringify(o.value));
const effect = (w: Write) => (w.kind === 'delete' ? 'delete' : w.kind === 'earlier' ? `${w.op} of an earlier value` : `= ${JSON.stringify(w.value)}`);

/**
 * The writes that may have set what `obs` saw: for "absent", the initial state or a delete; for a
 * value, the puts of it, and each restore or undelete answered after one of those was invoked.
 */
function explaining(obs: Observation, writes: Write[]): Write[] {
  if (obs.absent) return [INITIAL, ...writes.filter((w) => w.kind === 'delete')];
  const puts = writes.filter((w) => w.kind === 'put' && w.value === obs.value && w.invokeN < obs.okN);
  return [...puts, ...writes.filter((w) => w.kind === 'earlier' && puts.some((p) => p.invokeN < w.okN))];
}

function judge(obs: Observation, writes: Write[]): Judgement {
  const possible = explaining(obs, writes).filter((c) => c.invokeN < obs.okN);
  if (possible.length === 0) return { ok: false, kind: 'never written', detail: `${obs.readId} read ${obs.key} = ${show(obs)}, a value no write (not refused, invoked before the read answered) set` };
  const before = writes.filter((w) => w.acked && w.okN < obs.invokeN);
  let blockers: Write[] = [];
  for (const c of possible) {
    const overwritten = before.filter((w) => w !== c && c.okN < w.invokeN);
    if (overwritten.length === 0) return { ok: true };
    if (blockers.length === 0 || overwritten.length < blockers.length) blockers = overwritten;
  }
  const latest = blockers.reduce((a, b) => (b.okN > a.okN ? b : a));
  const what = `${obs.readId} read ${obs.key} = ${show(obs)} (written by ${possible.map((c) => c.id).join('/')})`;
  const after = `${latest.id} (${effect(latest)}, acknowledged at n=${latest.okN}) came after it and was acknowledged before the read (n=${obs.invokeN})`;
  if (!obs.final) return { ok: false, kind: 'stale', detail: `stale read: ${what}, but ${after}` };
  if (!obs.absent && blockers.some((b) => b.kind === 'delete') && blockers.every((b) => b.kind === 'delete')) return { ok: false, kind: 'resurrection', detail: `resurrection: final ${what}, but ${after}` };
  return { ok: false, kind: 'lost write', detail: `lost write: final ${what}, but ${after}` };
}

export function checkVault(lines: readonly HistoryLine[]): Verdict[] {
  const ops = collect(lines);
  const byKey = writesByKey(ops);
  const keys = new Set([...ops.map((o) => o.key).filter((k): k is string => k !== undefined)]);
  const all = [...observations(ops), ...listAbsences(ops, keys)];
  const during = all.filter((o) => !o.final);

  // The final state of each key: its last final read that was answered.
  const finals = new Map<string, Observation>();
  for (const o of all) if (o.final) finals.set(o.key, o);
  const finalKeys = new Set(ops.filter((o) => o.final).map((o) => o.key!));

  const lost: string[] = [];
  const resurrected: string[] = [];
  const stale: string[] = [];
  const neverWritten: string[] = [];
  for (const o of all) {
    const j = judge(o, byKey.get(o.key) ?? []);
    if (j.ok) continue;
    if (j.kind === 'never written') neverWritten.push(j.detail);
    else if (j.kind === 'stale') stale.push(j.detail);
    else if (j.kind === 'resurrection') resurrected.push(j.detail);
    else lost.push(j.detail);
  }

  // A version read: its value written to that key (by a write not refused) before it answered.
  const versionReads = ops.filter((o) => o.op === 'readVersion' && o.outcome === 'ok' && o.key !== undefined && o.result && o.result.absent !== true);
  for (const o of versionReads) {
    const value = String(o.result!.value);
    if (!(byKey.get(o.key!) ?? []).some((w) => w.kind === 'put' && w.value === value && w.invokeN < o.okN)) {
      neverWritten.push(`${o.id} read version ${o.version} of ${o.key} = ${JSON.stringify(value)}, a value no write (not refused, invoked before the read answered) set`);
    }
  }

  const ackedPuts = ops.filter((o) => o.outcome === 'ok' && (o.op === 'create' || o.op === 'update')).length;
  const ackedDeletes = ops.filter((o) => o.outcome === 'ok' && o.op === 'delete').length;
  if (ops.length > 0 && ackedPuts === 0) lost.push('no write was acknowledged: nothing to check');
  const unanswered = [...finalKeys].filter((k) => !finals.has(k)).map((k) => `${k}: no final read answered`);
  if (ops.length > 0 && finalKeys.size === 0) unanswered.push('no final read was made');

  // Check-and-set: two acknowledged updates from one (version, value) of a key, with no delete
  // (that could have started the key over at version 1) overlapping the two.
  const cas = ops.filter((o) => o.op === 'update' && o.outcome === 'ok' && o.version !== undefined);
  const doubled: string[] = [];
  for (let i = 0; i < cas.length; i++) {
    for (let j = i + 1; j < cas.length; j++) {
      const a = cas[i];
      const b = cas[j];
      if (a.key !== b.key || a.version !== b.version || a.base !== b.base) continue;
      const from = Math.min(a.invokeN, b.invokeN);
      const to = Math.max(a.okN, b.okN);
      const deleteBetween = (byKey.get(a.key!) ?? []).some((w) => w.kind === 'delete' && w.invokeN < to && w.okN > from);
      if (!deleteBetween) doubled.push(`${a.id} and ${b.id} both updated ${a.key} from version ${a.version} (${JSON.stringify(a.base)})`);
    }
  }

  const preconditions = checkPreconditions(ops, byKey);

  const verdicts: Verdict[] = [
    { check: 'vault: every acknowledged write is in the final state or overwritten', checked: ackedPuts, anomalies: lost },
    { check: 'vault: no resurrection after an acknowledged delete', checked: ackedDeletes, anomalies: resurrected },
    { check: 'vault: no stale read during the run', checked: during.length, anomalies: stale },
    { check: 'vault: every value read was written (by a write not refused)', checked: all.length + versionReads.length, anomalies: neverWritten },
    { check: 'vault: check-and-set never succeeds twice from one version', checked: cas.length, anomalies: doubled },
    { check: 'vault: creates succeed only on absent keys (undeletes too), updates/restores/deletes on present', checked: preconditions.checked, anomalies: preconditions.anomalies },
    { check: 'vault: every key answered its final read', checked: finalKeys.size, anomalies: unanswered },
  ];
  if (!ops.some((o) => VERSION_OPS.includes(o.op))) return verdicts;
  const destroyedVersions = checkDestroyedVersions(ops);
  const undeletes = checkUndeletes(ops);
  return [
    ...verdicts,
    { check: 'vault: no destroyed version is read back', checked: destroyedVersions.checked, anomalies: destroyedVersions.anomalies },
    { check: 'vault: no undelete of a deleted secret destroyed whole', checked: undeletes.checked, anomalies: undeletes.anomalies },
    ...checkShredded(lines),
  ];
}

/**
 * The settle's reading of the streams with the master key (chaos/vault-shred.ts): no destroyed
 * value sealed under a value key opens, and the final values do (else the reading proves nothing).
 */
function checkShredded(lines: readonly HistoryLine[]): Verdict[] {
  const l = [...lines].reverse().find((x) => x.kind === KIND && x.op === 'shred');
  if (!l) return [];
  if (typeof l.error === 'string') return [{ check: 'vault: no destroyed value under a value key opens from the streams', checked: 0, anomalies: [`the streams could not be read: ${l.error}`] }];
  const opened = (l.underValueKeys as string[]).map((v) => `destroyed value ${JSON.stringify(v)} opens from the streams with the master key: its value key was not erased`);
  const unopened = (l.liveUnopened as string[]).map((v) => `final value ${JSON.stringify(v)} does not open from the streams: the reading proves nothing`);
  return [
    { check: 'vault: no destroyed value under a value key opens from the streams (the master key in hand)', checked: Number(l.destroyed), anomalies: [...opened, ...unopened] },
    { check: `vault: (info) destroyed values under their data keys still in the secrets bucket's history (until the hourly sweep): ${Number(l.underDataKeys)}; stream messages read: ${Number(l.messages)}`, checked: Number(l.destroyed), anomalies: [] },
  ];
}

/** Whether a create of `key`, not refused, can come after `from` was invoked and before `to` answered. */
const createBetween = (ops: Op[], key: string, from: Op, to: Op) => ops.some((c) => c.key === key && c.op === 'create' && c.outcome !== 'fail' && c.okN > from.invokeN && c.invokeN < to.okN);

/**
 * A `readVersion` invoked after a destroy of that version was acknowledged, answering a value. A
 * version number comes again only in a new generation (a delete, then a create), so a create that
 * can come between the two excuses it. A destroy without a version (the deleted secret whole) is not
 * judged here: a live generation created before it may hold the same numbers.
 */
function checkDestroyedVersions(ops: Op[]): { checked: number; anomalies: string[] } {
  const destroys = ops.filter((o) => o.op === 'destroy' && o.outcome === 'ok' && o.key !== undefined && o.version !== undefined);
  const reads = ops.filter((o) => o.op === 'readVersion' && o.outcome === 'ok' && o.result && o.result.absent !== true);
  const anomalies: string[] = [];
  for (const d of destroys) {
    const gone = Array.isArray(d.result?.destroyed) ? (d.result!.destroyed as number[]) : [d.version!];
    for (const r of reads) {
      if (r.key !== d.key || r.invokeN < d.okN || !gone.includes(r.version!) || createBetween(ops, d.key!, d, r)) continue;
      anomalies.push(`${r.id} read version ${r.version} of ${r.key} = ${JSON.stringify(r.result!.value)}, though ${d.id} destroyed it (acknowledged at n=${d.okN}) and no create can come between`);
    }
  }
  return { checked: destroys.length, anomalies };
}

/**
 * An undelete acknowledged after a destroy of the deleted secret whole was acknowledged, with no
 * delete (not refused) that can come between to leave a new deleted copy.
 */
function checkUndeletes(ops: Op[]): { checked: number; anomalies: string[] } {
  const destroys = ops.filter((o) => o.op === 'destroy' && o.outcome === 'ok' && o.key !== undefined && o.version === undefined);
  const undeletes = ops.filter((o) => o.op === 'undelete' && o.outcome === 'ok');
  const anomalies: string[] = [];
  for (const u of undeletes) {
    const d = destroys.filter((x) => x.key === u.key && x.okN < u.invokeN).reduce<Op | null>((a, b) => (a === null || b.invokeN > a.invokeN ? b : a), null);
    if (!d) continue;
    const deletable = ops.some((x) => x.key === u.key && x.op === 'delete' && x.outcome !== 'fail' && x.okN > d.invokeN && x.invokeN < u.okN);
    if (!deletable) anomalies.push(`${u.id}: undelete of ${u.key} acknowledged (n=${u.okN}) though ${d.id} destroyed its deleted copy whole (acknowledged at n=${d.okN}) and no delete can come between`);
  }
  return { checked: destroys.length, anomalies };
}

/**
 * A create (or an undelete, which also needs the name free) acknowledged while its key was
 * definitely present (an acknowledged create, update, restore or undelete came before it, and no
 * delete can be placed between the two), or an update, restore or delete acknowledged while its key
 * was definitely absent (after an acknowledged delete, or from the start, with no create or undelete
 * that can be placed between). Against the latest such write only: a later one leaves less room.
 */
function checkPreconditions(ops: Op[], byKey: Map<string, Write[]>): { checked: number; anomalies: string[] } {
  const anomalies: string[] = [];
  let checked = 0;
  for (const o of ops) {
    if (o.outcome !== 'ok' || o.key === undefined || !(o.op in KINDS)) continue;
    checked++;
    const writes = byKey.get(o.key) ?? [];
    const creates = ops.filter((c) => c.key === o.key && (c.op === 'create' || c.op === 'undelete') && c.outcome !== 'fail');
    const latest = (kinds: Array<Write['kind']>) =>
      writes.filter((w) => kinds.includes(w.kind) && w.acked && w.id !== o.id && w.okN < o.invokeN).reduce<Write | null>((a, b) => (a === null || b.invokeN > a.invokeN ? b : a), null);
    if (o.op === 'create' || o.op === 'undelete') {
      const present = latest(['put', 'earlier']);
      if (!present) continue;
      const deletable = writes.some((d) => d.kind === 'delete' && !(d.okN < present.invokeN) && d.invokeN < o.okN);
      const what = o.op === 'create' ? `create of ${o.key} = ${JSON.stringify(o.value)}` : `undelete of ${o.key}`;
      if (!deletable) anomalies.push(`${o.id}: ${what} acknowledged (n=${o.okN}) though ${present.id} (${effect(present)}, acknowledged at n=${present.okN}) had set it and no delete can come between`);
    } else {
      const absent = latest(['delete']) ?? INITIAL;
      const creatable = creates.some((c) => !(c.okN < absent.invokeN) && c.invokeN < o.okN);
      if (!creatable) anomalies.push(`${o.id}: ${o.op} of ${o.key} acknowledged (n=${o.okN}) though it was absent (${absent.id}${absent.kind === 'initial' ? '' : `, acknowledged at n=${absent.okN}`}) and no create can come between`);
    }
  }
  return { checked, anomalies };
}
