import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/**
 * The promises of user and app churn, judged from the history alone (kind `users`, see
 * workloads/users.ts). docs/protocol.md, Identities: "A revoked user token stops working on every
 * edge within 1 s" and "Uninstall revokes the key at once"; docs/provider-calls.md: an access token
 * is refused (401) once "its app was uninstalled/reinstalled since". The same 1 s bound is applied
 * to the app's access tokens and key (the registry cache that carries both is the same).
 *
 * - Safety: a token issued (acknowledged) before a revocation was invoked, used in a request
 *   invoked more than 1 s after the revocation was acknowledged, is refused. Likewise an access
 *   token obtained, or an app key installed, before an acknowledged uninstall of that app.
 * - Liveness (what keeps the safety check from passing vacuously): a token no revocation may have
 *   touched (none invoked before the probe's answer, none unknown), used more than 1 s after it was
 *   acknowledged, is accepted; likewise an access token of an app no uninstall may have touched,
 *   within its 5-minute life.
 * Timing uses the runner's clock (`t`); which came first uses the history's order (`n`).
 */

export const REVOCATION_BOUND_MS = 1_000;
/** An access token lives 5 minutes; liveness is judged well within that. */
const ACCESS_LIFE_MS = 4.5 * 60_000;

const KIND = 'users';

export interface UsersOp {
  id: string;
  op: string;
  fields: HistoryLine;
  invokeN: number;
  invokeT: number;
  outcome: 'ok' | 'fail' | 'unknown';
  result: HistoryLine | null;
  /** The outcome line's `n` and `t` (Infinity when unknown or missing). */
  endN: number;
  endT: number;
}

function collect(lines: readonly HistoryLine[]): UsersOp[] {
  const ops = new Map<string, UsersOp>();
  for (const l of lines) {
    if (l.kind !== KIND || l.phase === 'info') continue;
    if (l.phase === 'invoke') {
      ops.set(l.id, { id: l.id, op: l.op, fields: l, invokeN: l.n, invokeT: l.t, outcome: 'unknown', result: null, endN: Infinity, endT: Infinity });
      continue;
    }
    const o = ops.get(l.id);
    if (!o) continue;
    o.outcome = l.phase as UsersOp['outcome'];
    o.result = l;
    if (l.phase !== 'unknown') {
      o.endN = l.n;
      o.endT = l.t;
    }
  }
  return [...ops.values()];
}

const str = (v: unknown) => String(v);

export function checkUsers(lines: readonly HistoryLine[]): Verdict[] {
  const ops = collect(lines);
  const acked = (o: UsersOp) => o.outcome === 'ok';
  const mayHaveHappened = (o: UsersOp) => o.outcome !== 'fail';

  // User tokens, by fingerprint: whose, and when issued.
  const tokens = new Map<string, { user: string; id: string; invokeN: number; okN: number; okT: number }>();
  for (const o of ops) {
    if ((o.op === 'user add' || o.op === 'token') && acked(o) && o.result?.token !== undefined) {
      tokens.set(str(o.result.token), { user: str(o.fields.user), id: o.id, invokeN: o.invokeN, okN: o.endN, okT: o.endT });
    }
  }
  const revokes = ops.filter((o) => o.op === 'revoke');
  const probes = ops.filter((o) => o.op === 'probe');

  const revokedAccepted: string[] = [];
  const liveRefused: string[] = [];
  let judgedRevoked = 0;
  let judgedLive = 0;
  for (const p of probes) {
    const tok = tokens.get(str(p.fields.token));
    if (!tok) continue;
    const ofUser = revokes.filter((r) => str(r.fields.user) === tok.user);
    const revokedBy = ofUser.find((r) => acked(r) && r.invokeN > tok.okN && p.invokeT > r.endT + REVOCATION_BOUND_MS);
    if (revokedBy) {
      if (p.outcome === 'unknown') continue;
      judgedRevoked++;
      if (p.outcome === 'ok') {
        revokedAccepted.push(`${p.id}: token ${str(p.fields.token)} of ${tok.user} accepted ${p.invokeT - revokedBy.endT} ms after revocation ${revokedBy.id} was acknowledged (status ${str(p.result?.status)})`);
      }
      continue;
    }
    // Liveness: no revocation that may have taken effect after the token existed and before the probe answered.
    const touched = ofUser.some((r) => mayHaveHappened(r) && r.endN > tok.invokeN && r.invokeN < p.endN);
    if (touched || p.outcome === 'unknown' || p.invokeT <= tok.okT + REVOCATION_BOUND_MS) continue;
    judgedLive++;
    if (p.outcome === 'fail') liveRefused.push(`${p.id}: token ${str(p.fields.token)} of ${tok.user}, never revoked, refused ${p.invokeT - tok.okT} ms after it was issued (status ${str(p.result?.status)})`);
  }

  // Apps: installs, the access tokens obtained for them, uninstalls.
  const installs = new Map<string, UsersOp>();
  for (const o of ops) if (o.op === 'install' && acked(o)) installs.set(str(o.fields.install), o);
  const accessTokens = new Map<string, UsersOp>();
  for (const o of ops) if (o.op === 'access' && acked(o) && o.result?.access !== undefined) accessTokens.set(str(o.result.access), o);
  const uninstalls = ops.filter((o) => o.op === 'uninstall');
  const uninstallsOf = (user: unknown, app: unknown) => uninstalls.filter((u) => str(u.fields.user) === str(user) && str(u.fields.app) === str(app));

  const uninstalledAccepted: string[] = [];
  const liveAccessRefused: string[] = [];
  let judgedUninstalled = 0;
  for (const p of ops.filter((o) => o.op === 'access probe')) {
    const got = accessTokens.get(str(p.fields.access));
    if (!got) continue;
    const ofApp = uninstallsOf(got.fields.user, got.fields.app);
    const deadBy = ofApp.find((u) => acked(u) && u.invokeN > got.endN && p.invokeT > u.endT + REVOCATION_BOUND_MS);
    if (deadBy) {
      if (p.outcome === 'unknown') continue;
      judgedUninstalled++;
      if (p.outcome === 'ok') {
        uninstalledAccepted.push(`${p.id}: access token ${str(p.fields.access)} of ${str(got.fields.install)} accepted ${p.invokeT - deadBy.endT} ms after uninstall ${deadBy.id} was acknowledged (status ${str(p.result?.status)})`);
      }
      continue;
    }
    const touched = ofApp.some((u) => mayHaveHappened(u) && u.endN > got.invokeN && u.invokeN < p.endN);
    if (touched || p.outcome === 'unknown' || p.invokeT <= got.endT + REVOCATION_BOUND_MS || p.invokeT > got.endT + ACCESS_LIFE_MS) continue;
    judgedLive++;
    if (p.outcome === 'fail') liveAccessRefused.push(`${p.id}: access token ${str(p.fields.access)} of ${str(got.fields.install)}, app not uninstalled, refused ${p.invokeT - got.endT} ms after it was issued (status ${str(p.result?.status)})`);
  }
  for (const p of ops.filter((o) => o.op === 'old key')) {
    const inst = installs.get(str(p.fields.install));
    if (!inst) continue;
    const deadBy = uninstallsOf(inst.fields.user, inst.fields.app).find((u) => acked(u) && u.invokeN > inst.endN && p.invokeT > u.endT + REVOCATION_BOUND_MS);
    if (!deadBy || p.outcome === 'unknown') continue;
    judgedUninstalled++;
    if (p.outcome === 'ok') uninstalledAccepted.push(`${p.id}: key of ${str(p.fields.install)} got an access token ${p.invokeT - deadBy.endT} ms after uninstall ${deadBy.id} was acknowledged`);
  }

  const active = ops.length > 0;
  if (active && judgedRevoked === 0) revokedAccepted.push('no probe of a revoked token past the bound: nothing was checked');
  if (active && judgedUninstalled === 0) uninstalledAccepted.push("no probe of an uninstalled app's token or key past the bound: nothing was checked");
  if (active && judgedLive === 0) liveRefused.push('no probe of a live token: nothing was checked');

  return [
    { check: 'users: a revoked user token is refused 1 s after the revocation', checked: judgedRevoked, anomalies: revokedAccepted },
    { check: "users: an uninstalled app's access tokens and key are refused after 1 s", checked: judgedUninstalled, anomalies: uninstalledAccepted },
    { check: 'users: live user and access tokens are accepted 1 s after issue', checked: judgedLive, anomalies: [...liveRefused, ...liveAccessRefused] },
  ];
}
