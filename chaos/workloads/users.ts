import { vaultPerm } from '../../test/helpers/app-client.js';
import type { Rng } from '../random.js';
import { admin, errorText, fingerprint, hostGet, jsonFetch, requestAccessToken, sleep, adminSettled, type Answer } from '../vault-http.js';
import type { Workload, WorkloadContext } from '../workload.js';
import { checkUsers, REVOCATION_BOUND_MS } from '../checks/users.js';
import type { Access, Install, Shared, Slot, Token, UserState } from './users-state.js';

/**
 * User and app churn through the admin API, probing the promise "a revoked user token stops working
 * on every edge within 1 s" (docs/protocol.md, Identities) and its twin for apps (an uninstalled
 * app's access tokens and key stop working). Each worker owns its users and one app slot, so its
 * operations on them are sequential: a revocation covers exactly the tokens issued before it.
 *
 * Probes, through haproxy:
 * - user token: `GET /upload/probe` on the upload listener with `Host: nope.<user>.localhost`. The
 *   edge checks the token before the app, so 404 "app … is not installed" means the token was
 *   accepted and 401 that it was refused (ok / fail in the history); anything else is unknown.
 * - access token: vault `RetrieveSecret` of a name never written: 404 "not found" (or 200, 403) is
 *   accepted, 401 refused.
 * - app key: a fresh access request with an uninstalled app's key (each refusal counts against the
 *   client address's 50 failures a minute, shared with every workload: rationed).
 *
 * History (kind `users`): `user add {user}` → `{token}`, `token {user}` → `{token}`, `revoke {user}`,
 * `probe {user, token}`, `install {user, app, install}`, `uninstall {user, app}`, `access {user, app,
 * install}` → `{access}`, `access probe {user, app, install, access}`, `old key {user, app, install}`.
 * Tokens appear only as fingerprints.
 */
const KIND = 'users';
const WORKERS = 3;
const USERS_PER_WORKER = 3;
const TOKENS_KEPT = 12;
const OLD_ACCESS_KEPT = 10;
const MAX_OPS_PER_WORKER = 100_000;
/** At most one old-key probe this often (failures per client address are limited to 50 a minute). */
const OLD_KEY_EVERY_MS = 10_000;
/** An app the token actors have not heard of yet refuses its key (and counts a failure): wait this long after install. */
const ACCESS_AFTER_INSTALL_MS = 1_500;
const WORKSPACE = 'uw';
const PERM = vaultPerm(WORKSPACE, ['RetrieveSecret']);

let shared: Shared | null = null;

const manifest = (app: string) =>
  [`metadata: { name: ${app}, version: '1' }`, 'permission:', '  sysData:', `    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=${WORKSPACE}] }`, ''].join('\n');

const message = (a: Answer) => String(a.json?.message ?? a.text).slice(0, 200);
const keep = <T>(list: T[], item: T, max: number) => {
  list.push(item);
  if (list.length > max) list.shift();
};

/** An admin call recorded as one operation: 2xx ok, 4xx fail, anything else unknown. */
async function adminOp(ctx: WorkloadContext, op: string, fields: Record<string, unknown>, method: string, path: string, body?: unknown): Promise<Answer | null> {
  const h = ctx.history;
  const id = h.invoke(KIND, op, fields);
  let a: Answer;
  try {
    a = await admin(ctx.cluster, method, path, body);
  } catch (err) {
    h.unknown(KIND, op, id, { error: errorText(err) });
    return null;
  }
  if (a.status >= 200 && a.status < 300) {
    const token = typeof a.json?.data?.token === 'string' ? { token: fingerprint(a.json.data.token) } : {};
    h.ok(KIND, op, id, { status: a.status, ...token });
    return a;
  }
  if (a.status >= 400 && a.status < 500) h.fail(KIND, op, id, { status: a.status, message: message(a) });
  else h.unknown(KIND, op, id, { status: a.status, message: message(a) });
  return null;
}

async function probeUser(ctx: WorkloadContext, user: string, t: Token): Promise<void> {
  const h = ctx.history;
  const id = h.invoke(KIND, 'probe', { user, token: t.fp });
  try {
    const a = await hostGet(`${ctx.cluster.url('upload')}/upload/probe`, `nope.${user}.localhost`, { 'x-authorization': t.token });
    if (a.status === 404 && /not installed/.test(message(a))) h.ok(KIND, 'probe', id, { status: a.status, accepted: true });
    else if (a.status === 401) h.fail(KIND, 'probe', id, { status: a.status, message: message(a) });
    else h.unknown(KIND, 'probe', id, { status: a.status, message: message(a) });
  } catch (err) {
    h.unknown(KIND, 'probe', id, { error: errorText(err) });
  }
}

async function probeAccess(ctx: WorkloadContext, acc: Access): Promise<void> {
  const h = ctx.history;
  const fields = { user: acc.user, app: acc.app, install: acc.install, access: acc.fp };
  const id = h.invoke(KIND, 'access probe', fields);
  try {
    const url = `${ctx.cluster.url('system')}/system-server/v1alpha1/secret/secret.vault/v1/RetrieveSecret?workspace=${WORKSPACE}`;
    const a = await jsonFetch(url, 'POST', { 'x-access-token': acc.token }, { name: 'probe', env: 'prod' });
    if (a.status === 200 || a.status === 403 || (a.status === 404 && /not found/.test(message(a)))) h.ok(KIND, 'access probe', id, { status: a.status, accepted: true });
    else if (a.status === 401) h.fail(KIND, 'access probe', id, { status: a.status, message: message(a) });
    else h.unknown(KIND, 'access probe', id, { status: a.status, message: message(a) });
  } catch (err) {
    h.unknown(KIND, 'access probe', id, { error: errorText(err) });
  }
}

async function getAccess(ctx: WorkloadContext, slot: Slot, inst: Install): Promise<void> {
  const h = ctx.history;
  const id = h.invoke(KIND, 'access', { user: slot.user, app: slot.app, install: inst.label });
  try {
    const { token } = await requestAccessToken(ctx.cluster.url('system'), { key: inst.key, secret: inst.secret }, PERM);
    slot.access = { token, fp: fingerprint(token), install: inst.label, user: slot.user, app: slot.app };
    h.ok(KIND, 'access', id, { access: slot.access.fp });
  } catch (err) {
    const status = (err as { status?: number }).status;
    if (status !== undefined && status >= 400 && status < 500) h.fail(KIND, 'access', id, { status, message: errorText(err) });
    else h.unknown(KIND, 'access', id, { ...(status === undefined ? {} : { status }), error: errorText(err) });
  }
}

async function oldKey(ctx: WorkloadContext, s: Shared, rng: Rng): Promise<void> {
  const ready = s.oldKeys.filter((k) => Date.now() > k.uninstalledAt + REVOCATION_BOUND_MS + 100);
  if (ready.length === 0 || Date.now() - s.lastOldKey < OLD_KEY_EVERY_MS) return;
  s.lastOldKey = Date.now();
  const k = rng.pick(ready);
  const h = ctx.history;
  const id = h.invoke(KIND, 'old key', { user: k.user, app: k.app, install: k.install.label });
  try {
    await requestAccessToken(ctx.cluster.url('system'), { key: k.install.key, secret: k.install.secret }, PERM);
    h.ok(KIND, 'old key', id, { accepted: true });
  } catch (err) {
    const status = (err as { status?: number }).status;
    if (status !== undefined && status >= 400 && status < 500) h.fail(KIND, 'old key', id, { status, message: errorText(err) });
    else h.unknown(KIND, 'old key', id, { ...(status === undefined ? {} : { status }), error: errorText(err) });
  }
}

/** Waits until just past the bound after an acknowledgement, then probes: the promise's edge. */
const pastBound = (ackAt: number) => sleep(Math.max(0, ackAt + REVOCATION_BOUND_MS + 50 - Date.now()));

async function appStep(ctx: WorkloadContext, s: Shared, slot: Slot, rng: Rng): Promise<void> {
  if (slot.state === 'no') {
    const label = `${slot.user}/${slot.app}#${++slot.installs}`;
    const a = await adminOp(ctx, 'install', { user: slot.user, app: slot.app, install: label }, 'POST', '/admin/v1/apps', { user: slot.user, manifest: manifest(slot.app) });
    if (a) {
      const env = a.json.data.env as { OS_APP_KEY: string; OS_APP_SECRET: string };
      slot.current = { label, key: env.OS_APP_KEY, secret: env.OS_APP_SECRET, ackAt: Date.now() };
      slot.state = 'yes';
    } else slot.state = 'maybe'; // refused (409: installed already) or unknown: uninstall next
    return;
  }
  if (slot.state === 'yes' && slot.current && !slot.access) {
    if (Date.now() - slot.current.ackAt >= ACCESS_AFTER_INSTALL_MS) await getAccess(ctx, slot, slot.current);
    return;
  }
  if (slot.state === 'yes' && slot.access && rng.chance(0.6)) return probeAccess(ctx, slot.access);
  // Uninstall: its access token and key go to the old lists, probed past the bound.
  const id = ctx.history.invoke(KIND, 'uninstall', { user: slot.user, app: slot.app });
  let a: Answer | null = null;
  let error = '';
  try {
    a = await admin(ctx.cluster, 'DELETE', `/admin/v1/apps/${slot.user}/${slot.app}`);
  } catch (err) {
    error = errorText(err);
  }
  const ackAt = Date.now();
  if (a && a.status === 200) ctx.history.ok(KIND, 'uninstall', id, { status: 200 });
  else if (a && a.status >= 400 && a.status < 500) ctx.history.fail(KIND, 'uninstall', id, { status: a.status, message: message(a) });
  else ctx.history.unknown(KIND, 'uninstall', id, a ? { status: a.status, message: message(a) } : { error });
  if (a && a.status === 404) {
    slot.state = 'no'; // not installed (an unknown uninstall or install before this one settled it)
    slot.current = null;
    slot.access = null;
    return;
  }
  if (!a || a.status !== 200) {
    slot.state = 'maybe';
    return;
  }
  const access = slot.access;
  if (access) keep(s.oldAccess, access, OLD_ACCESS_KEPT);
  if (slot.current) keep(s.oldKeys, { install: slot.current, user: slot.user, app: slot.app, uninstalledAt: ackAt }, OLD_ACCESS_KEPT);
  slot.state = 'no';
  slot.current = null;
  slot.access = null;
  if (access) {
    await pastBound(ackAt);
    await probeAccess(ctx, access);
  }
}

async function worker(ctx: WorkloadContext, s: Shared, w: number, rng: Rng): Promise<void> {
  const mine = s.users[w];
  const slot: Slot = { user: mine[0].name, app: `churn${w}`, state: 'no', installs: 0, current: null, access: null };
  for (let i = 0; i < MAX_OPS_PER_WORKER && Date.now() < ctx.deadline; i++) {
    const u = rng.pick(mine);
    const roll = rng.next();
    if (roll < 0.4) {
      const t = u.live && rng.chance(0.7) ? u.live : u.tokens.length > 0 ? rng.pick(u.tokens) : null;
      if (t) await probeUser(ctx, u.name, t);
    } else if (roll < 0.5) {
      const a = await adminOp(ctx, 'token', { user: u.name }, 'POST', `/admin/v1/users/${u.name}/tokens`);
      if (a) {
        const t = { token: a.json.data.token as string, fp: fingerprint(a.json.data.token) };
        keep(u.tokens, t, TOKENS_KEPT);
        u.live = t;
      }
    } else if (roll < 0.57) {
      const revoked = [...u.tokens];
      const a = await adminOp(ctx, 'revoke', { user: u.name }, 'POST', `/admin/v1/users/${u.name}/revoke`);
      u.live = null; // revoked, or maybe revoked: no token is known good any more
      if (a) {
        await pastBound(Date.now());
        for (const t of revoked.slice(-3)) await probeUser(ctx, u.name, t);
      }
    } else if (roll < 0.77) await appStep(ctx, s, slot, rng);
    else if (roll < 0.9) {
      if (s.oldAccess.length > 0) await probeAccess(ctx, rng.pick(s.oldAccess));
    } else if (roll < 0.93) {
      if (mine.length < USERS_PER_WORKER) {
        const name = `churn${w}-${mine.length}`;
        const a = await adminOp(ctx, 'user add', { user: name }, 'POST', '/admin/v1/users', { name });
        if (a) {
          const t = { token: a.json.data.token as string, fp: fingerprint(a.json.data.token) };
          mine.push({ name, tokens: [t], live: t });
        }
      }
    } else await oldKey(ctx, s, rng);
    await sleep(rng.int(20, 120));
  }
}

export const workload: Workload = {
  name: 'users',

  /** One user per worker, made before any fault (recorded: its first token is checked too). */
  async setup(ctx) {
    const users: UserState[][] = [];
    for (let w = 0; w < WORKERS; w++) {
      const name = `churn${w}`;
      const id = ctx.history.invoke(KIND, 'user add', { user: name });
      const a = await adminSettled(ctx.cluster, 'POST', '/admin/v1/users', { name });
      if (a.status !== 200) {
        ctx.history.fail(KIND, 'user add', id, { status: a.status, message: message(a) });
        throw new Error(`users setup: user add ${name} answered ${a.status} ${a.text}`);
      }
      const t = { token: a.json.data.token as string, fp: fingerprint(a.json.data.token) };
      ctx.history.ok(KIND, 'user add', id, { status: 200, token: t.fp });
      users.push([{ name, tokens: [t], live: t }]);
    }
    shared = { users, oldAccess: [], oldKeys: [], lastOldKey: 0 };
    ctx.log(`${WORKERS} workers, users ${users.map((u) => u[0].name).join(', ')}`);
  },

  async run(ctx) {
    const s = shared;
    if (!s) throw new Error('users: run before setup');
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(ctx, s, w, ctx.rng.fork(`worker-${w}`))));
  },

  /** Once healed: every old access token and every user's tokens probed once more (all past their bounds by now). */
  async settle(ctx) {
    const s = shared;
    if (!s) return;
    await sleep(REVOCATION_BOUND_MS + 100);
    for (const acc of s.oldAccess) await probeAccess(ctx, acc);
    for (const mine of s.users) for (const u of mine) for (const t of u.tokens.slice(-4)) await probeUser(ctx, u.name, t);
  },
};

export const check = checkUsers;
