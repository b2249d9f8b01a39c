import { randomBytes } from 'node:crypto';
import { vaultPerm } from '../../test/helpers/app-client.js';
import { checkCarry } from '../checks/carry.js';
import { AccessCache, adminSettled, errorText, jsonFetch, sleep, type Answer } from '../vault-http.js';
import type { Workload, WorkloadContext } from '../workload.js';

/**
 * Records that outlive a build: a fresh vault key created every `EVERY_MS` and never touched again,
 * each create retried as an SDK would (no answer or a 5xx: the same create again, the same value;
 * a 409 after such a try means the earlier one took effect), and every key read back at the end.
 * In an upgrade run the history stamps each line with the cluster's build phase, so the checker
 * (checks/carry.ts) can say which keys were acknowledged on the new build and read on the old one
 * after the rollback. The vault workload's keys are rewritten many times a second and cannot show that.
 *
 * History (kind `carry`): `create {key, value, attempt}` → ok / fail {status} / unknown; `read
 * {key, final}` → ok `{value}` or `{absent: true}` / fail / unknown.
 */
const KIND = 'carry';
const USER = 'carryu';
const APP = 'carryapp';
const WORKSPACE = 'carry';
const EVERY_MS = 500;
const MAX_KEYS = 2_000;
/**
 * A create is retried as the SDK paces retries (exponential from 250 ms, capped at 4 s, here without
 * the jitter so a seed replays) for up to 20 s: with one replica of a role (the short run in npm
 * test), the vault is away for its own replacement, which a loaded host stretched past 5 s (two CI
 * runs, where six linear tries spanned 3 s). How long requests failed is reported per step apart.
 */
const RETRY_BUDGET_MS = 20_000;
const retryPause = (attempt: number) => Math.min(4_000, 250 * 2 ** (attempt - 1));
const FINAL_READ_ATTEMPTS = 20;
const FINAL_READ_MS = 120_000;

const MANIFEST = [
  `metadata: { name: ${APP}, version: '1' }`,
  'permission:',
  '  sysData:',
  `    - { dataType: secret, group: secret.vault, version: v1, ops: [CreateSecret?workspace=${WORKSPACE}, RetrieveSecret?workspace=${WORKSPACE}] }`,
  '',
].join('\n');

interface State {
  access: AccessCache;
  keys: string[];
}

let state: State | null = null;

async function call(ctx: WorkloadContext, s: State, op: string, body: unknown): Promise<Answer | { error: string }> {
  let token = '';
  try {
    token = await s.access.get();
    const url = `${ctx.cluster.url('system')}/system-server/v1alpha1/secret/secret.vault/v1/${op}?workspace=${WORKSPACE}`;
    // Each request in a trace of its own, as an instrumented app sends it: trace context crosses the bus (and both releases in an upgrade run).
    const a = await jsonFetch(url, 'POST', { 'x-access-token': token, traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` }, body);
    if (a.status === 401) s.access.invalidate(token);
    return a;
  } catch (err) {
    return { error: errorText(err) };
  }
}

const succeeded = (a: Answer) => a.status === 200 && a.json?.code === 0 && a.json?.data?.code === 200;
const message = (a: Answer) => String(a.json?.message ?? a.text).slice(0, 200);

/** One key, created with retries until acknowledged, refused, or out of attempts. */
async function create(ctx: WorkloadContext, s: State, key: string): Promise<void> {
  const value = `${key}@${Date.now()}`;
  const giveUpAt = Date.now() + RETRY_BUDGET_MS;
  for (let attempt = 1; ; attempt++) {
    const id = ctx.history.invoke(KIND, 'create', { key, value, attempt });
    const a = await call(ctx, s, 'CreateSecret', { name: key, env: 'prod', value });
    if ('error' in a) ctx.history.unknown(KIND, 'create', id, { key, error: a.error });
    else if (succeeded(a)) return ctx.history.ok(KIND, 'create', id, { key });
    else if (a.status >= 400 && a.status < 500 && a.status !== 401 && a.status !== 429) return ctx.history.fail(KIND, 'create', id, { key, status: a.status, message: message(a) });
    else ctx.history.unknown(KIND, 'create', id, { key, status: a.status, message: message(a) });
    if (Date.now() + retryPause(attempt) > giveUpAt) return;
    await sleep(retryPause(attempt));
  }
}

async function read(ctx: WorkloadContext, s: State, key: string): Promise<boolean> {
  const id = ctx.history.invoke(KIND, 'read', { key, final: true });
  const a = await call(ctx, s, 'RetrieveSecret', { name: key, env: 'prod' });
  if ('error' in a) {
    ctx.history.unknown(KIND, 'read', id, { key, error: a.error });
    return false;
  }
  if (succeeded(a) && typeof a.json.data.data?.value === 'string') ctx.history.ok(KIND, 'read', id, { key, value: a.json.data.data.value });
  else if (a.status === 404 && /not found/.test(message(a))) ctx.history.ok(KIND, 'read', id, { key, absent: true });
  else {
    (a.status >= 400 && a.status < 500 ? ctx.history.fail : ctx.history.unknown).call(ctx.history, KIND, 'read', id, { key, status: a.status, message: message(a) });
    return false;
  }
  return true;
}

export const workload: Workload = {
  name: 'carry',

  async setup(ctx) {
    const added = await adminSettled(ctx.cluster, 'POST', '/admin/v1/users', { name: USER });
    if (added.status !== 200 && added.status !== 409) throw new Error(`carry setup: user add answered ${added.status} ${added.text}`);
    const installed = await adminSettled(ctx.cluster, 'POST', '/admin/v1/apps', { user: USER, manifest: MANIFEST });
    if (installed.status !== 200) throw new Error(`carry setup: install answered ${installed.status} ${installed.text}`);
    const env = installed.json.data.env as { OS_APP_KEY: string; OS_APP_SECRET: string };
    const access = new AccessCache(ctx.cluster.url('system'), { key: env.OS_APP_KEY, secret: env.OS_APP_SECRET }, vaultPerm(WORKSPACE, ['CreateSecret', 'RetrieveSecret']));
    state = { access, keys: [] };
    for (let i = 0; ; i++) {
      try {
        await access.get();
        break;
      } catch (err) {
        if (i >= 20) throw new Error(`carry setup: no access token: ${errorText(err)}`);
        await sleep(500);
      }
    }
  },

  async run(ctx) {
    const s = state;
    if (!s) throw new Error('carry: run before setup');
    while (Date.now() < ctx.deadline && s.keys.length < MAX_KEYS) {
      const began = Date.now();
      const key = `c${String(s.keys.length).padStart(4, '0')}`;
      s.keys.push(key);
      await create(ctx, s, key);
      await sleep(Math.max(0, EVERY_MS - (Date.now() - began)));
    }
  },

  /** Every key read back once (retried, bounded, until the cluster answers). */
  async settle(ctx) {
    const s = state;
    if (!s) return;
    const until = Date.now() + FINAL_READ_MS;
    for (const key of s.keys) {
      for (let attempt = 0; attempt < FINAL_READ_ATTEMPTS && Date.now() < until; attempt++) {
        if (await read(ctx, s, key)) break;
        await sleep(500);
      }
    }
    state = null;
  },
};

export const check = checkCarry;
