import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/**
 * The carry workload's promise (workloads/carry.ts): a key whose create was acknowledged is read back
 * with its value at the end; a key whose creates all went unanswered may be there (with its value)
 * or not. Every key is written once, with one value, so a read judges it alone.
 *
 * In an upgrade run (lines stamped with `build`), the row that matters: keys acknowledged while the
 * whole cluster ran the new build (`build: 'new'`) and read back at the end, after the rollback,
 * while it ran the old one (`build: 'old again'`): the old build reads what the new one wrote.
 */
const KIND = 'carry';

export function checkCarry(lines: readonly HistoryLine[]): Verdict[] {
  const value = new Map<string, string>();
  const acked = new Map<string, HistoryLine>();
  const invokes = new Map<string, HistoryLine>();
  const finals = new Map<string, HistoryLine>();
  for (const l of lines) {
    if (l.kind !== KIND) continue;
    if (l.phase === 'invoke') {
      invokes.set(l.id, l);
      if (l.op === 'create') value.set(String(l.key), String(l.value));
    } else if (l.op === 'create' && l.phase === 'ok') acked.set(String(l.key), l);
    else if (l.op === 'read' && l.phase === 'ok') finals.set(String(l.key), l);
  }
  const lost: string[] = [];
  const wrong: string[] = [];
  for (const [key, read] of finals) {
    const saw = read.absent === true ? null : String(read.value);
    if (saw === null && acked.has(key)) lost.push(`${key}: create acknowledged (n=${acked.get(key)!.n}, build ${String(acked.get(key)!.build ?? '-')}), final read (n=${read.n}, build ${String(read.build ?? '-')}) found it absent`);
    if (saw !== null && saw !== value.get(key)) wrong.push(`${key}: read ${JSON.stringify(saw)}, written ${JSON.stringify(value.get(key))}`);
  }
  const unread = [...acked.keys()].filter((k) => !finals.has(k)).map((k) => `${k}: acknowledged, no final read answered`);

  const verdicts: Verdict[] = [
    { check: 'carry: every acknowledged create is read back at the end', checked: acked.size, anomalies: [...lost, ...unread] },
    { check: 'carry: every value read is the one its key was created with', checked: finals.size, anomalies: wrong },
  ];
  if (!lines.some((l) => l.kind === 'upgrade')) return verdicts;
  const onNew = [...acked.entries()].filter(([, l]) => l.build === 'new');
  const readOnOld = onNew.filter(([k]) => finals.get(k)?.build === 'old again' && finals.get(k)?.absent !== true);
  const carried: string[] = onNew.filter(([k]) => !readOnOld.some(([r]) => r === k)).map(([k]) => `${k}: acknowledged on the new build, final read ${finals.has(k) ? `on ${String(finals.get(k)!.build)}${finals.get(k)!.absent === true ? ', absent' : ''}` : 'never answered'}`);
  if (onNew.length === 0) carried.push('no create was acknowledged while the cluster ran the new build: nothing shows the old build reading it');
  verdicts.push({ check: 'carry: writes acknowledged on the new build read back on the old after rollback', checked: readOnOld.length, anomalies: carried });
  return verdicts;
}
