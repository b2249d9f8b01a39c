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
  kind: 'put' | 'delete' | 'initial';
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

/** A write's effect, unless it was refused. */
function writesByKey(ops: Op[]): Map<string, Write[]> {
  const out = new Map<string, Write[]>();
  for (const o of ops) {
    if (o.key === undefined || o.outcome === 'fail') continue;
    if (o.op !== 'create' && o.op !== 'update' && o.op !== 'delete') continue;
    const w: Write = { id: o.id, kind: o.op === 'delete' ? 'delete' : 'put', value: o.value, invokeN: o.invokeN, okN: o.okN, acked: o.outcome === 'ok' };
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

function judge(obs: Observation, writes: Write[]): Judgement {
  const candidates = obs.absent ? [INITIAL, ...writes.filter((w) => w.kind === 'delete')] : writes.filter((w) => w.kind === 'put' && w.value === obs.value);
  const possible = candidates.filter((c) => c.invokeN < obs.okN);
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
  const after = `${latest.id} (${latest.kind === 'delete' ? 'delete' : `= ${JSON.stringify(latest.value)}`}, acknowledged at n=${latest.okN}) came after it and was acknowledged before the read (n=${obs.invokeN})`;
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

  return [
    { check: 'vault: every acknowledged write is in the final state or overwritten', checked: ackedPuts, anomalies: lost },
    { check: 'vault: no resurrection after an acknowledged delete', checked: ackedDeletes, anomalies: resurrected },
    { check: 'vault: no stale read during the run', checked: during.length, anomalies: stale },
    { check: 'vault: every value read was written (by a write not refused)', checked: all.length, anomalies: neverWritten },
    { check: 'vault: check-and-set never succeeds twice from one version', checked: cas.length, anomalies: doubled },
    { check: 'vault: creates succeed only on absent keys, updates/deletes on present', checked: preconditions.checked, anomalies: preconditions.anomalies },
    { check: 'vault: every key answered its final read', checked: finalKeys.size, anomalies: unanswered },
  ];
}

/**
 * A create acknowledged while its key was definitely present (an acknowledged create or update came
 * before it, and no delete can be placed between the two), or an update or delete acknowledged while
 * its key was definitely absent (after an acknowledged delete, or from the start, with no create
 * that can be placed between). Against the latest such write only: a later one leaves less room.
 */
function checkPreconditions(ops: Op[], byKey: Map<string, Write[]>): { checked: number; anomalies: string[] } {
  const anomalies: string[] = [];
  let checked = 0;
  for (const o of ops) {
    if (o.outcome !== 'ok' || o.key === undefined || !['create', 'update', 'delete'].includes(o.op)) continue;
    checked++;
    const writes = byKey.get(o.key) ?? [];
    const creates = ops.filter((c) => c.key === o.key && c.op === 'create' && c.outcome !== 'fail');
    const latest = (kind: Write['kind']) =>
      writes.filter((w) => w.kind === kind && w.acked && w.id !== o.id && w.okN < o.invokeN).reduce<Write | null>((a, b) => (a === null || b.invokeN > a.invokeN ? b : a), null);
    if (o.op === 'create') {
      const present = latest('put');
      if (!present) continue;
      const deletable = writes.some((d) => d.kind === 'delete' && !(d.okN < present.invokeN) && d.invokeN < o.okN);
      if (!deletable) anomalies.push(`${o.id}: create of ${o.key} = ${JSON.stringify(o.value)} acknowledged (n=${o.okN}) though ${present.id} (= ${JSON.stringify(present.value)}, acknowledged at n=${present.okN}) had set it and no delete can come between`);
    } else {
      const absent = latest('delete') ?? INITIAL;
      const creatable = creates.some((c) => !(c.okN < absent.invokeN) && c.invokeN < o.okN);
      if (!creatable) anomalies.push(`${o.id}: ${o.op} of ${o.key} acknowledged (n=${o.okN}) though it was absent (${absent.id}${absent.kind === 'initial' ? '' : `, acknowledged at n=${absent.okN}`}) and no create can come between`);
    }
  }
  return { checked, anomalies };
}
