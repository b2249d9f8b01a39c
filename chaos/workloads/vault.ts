import { vaultPerm } from '../../test/helpers/app-client.js';
import type { History } from '../history.js';
import type { Rng } from '../random.js';
import { AccessCache, adminSettled, errorText, jsonFetch, sleep, type Answer } from '../vault-http.js';
import type { Workload, WorkloadContext } from '../workload.js';
import { checkVault } from '../checks/vault.js';

/**
 * The vault as an app uses it, under faults: one user, one app granted every op on one workspace,
 * `WORKERS` concurrent workers doing create / update / check-and-set update / read / list / delete on
 * `KEYS` names through the system listener behind haproxy, with one shared access token. Every
 * written value is unique, so the checker knows which write a read saw. History lines (kind
 * `vault`): `create|update {key, value[, version, base]}`, `delete {key}`, `read {key[, final]}` →
 * `{value, version}` or `{absent: true}`, `list` → `{values: {name: value}}`. A 4xx is `fail` (no
 * effect), a 5xx, a non-answer or a deadline `unknown`.
 */
const KIND = 'vault';
const USER = 'vaultu';
const APP = 'vaultapp';
const WORKSPACE = 'chaos';
export const VAULT_KEYS = Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, '0')}`);
const WORKERS = 4;
const MAX_OPS_PER_WORKER = 100_000;
const FINAL_READ_ATTEMPTS = 40;
const FINAL_READ_MS = 90_000;
const FINAL_ROUNDS = 3;

const MANIFEST = [
  `metadata: { name: ${APP}, version: '1' }`,
  'permission:',
  '  sysData:',
  `    - { dataType: secret, group: secret.vault, version: v1, ops: [${['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret'].map((o) => `${o}?workspace=${WORKSPACE}`).join(', ')}] }`,
  '',
].join('\n');

interface State {
  access: AccessCache;
  seq: number;
}

let state: State | null = null;

type Reply = { answer: Answer } | { error: string };

async function call(ctx: WorkloadContext, token: string, op: string, body: unknown): Promise<Reply> {
  try {
    const url = `${ctx.cluster.url('system')}/system-server/v1alpha1/secret/secret.vault/v1/${op}?workspace=${WORKSPACE}`;
    return { answer: await jsonFetch(url, 'POST', { 'x-access-token': token }, body) };
  } catch (err) {
    return { error: errorText(err) };
  }
}

const succeeded = (a: Answer) => a.status === 200 && a.json?.code === 0 && a.json?.data?.code === 200;
const message = (a: Answer) => String(a.json?.message ?? a.text).slice(0, 200);

/** Records a write's outcome: 200 ok, 4xx refused (no effect), anything else unknown. */
function settleWrite(h: History, s: State, token: string, op: string, id: string, reply: Reply): void {
  if ('error' in reply) return h.unknown(KIND, op, id, { error: reply.error });
  const a = reply.answer;
  if (succeeded(a)) return h.ok(KIND, op, id, { version: Number(a.header('x-pier-secret-version')) || null });
  if (a.status >= 400 && a.status < 500) {
    if (a.status === 401) s.access.invalidate(token);
    return h.fail(KIND, op, id, { status: a.status, message: message(a) });
  }
  h.unknown(KIND, op, id, { status: a.status, message: message(a) });
}

async function write(ctx: WorkloadContext, s: State, token: string, op: 'create' | 'update' | 'delete', key: string, extra: Record<string, unknown> = {}): Promise<void> {
  const value = op === 'delete' ? undefined : `${key}=${++s.seq}`;
  const vaultOp = { create: 'CreateSecret', update: 'UpdateSecret', delete: 'DeleteSecret' }[op];
  const id = ctx.history.invoke(KIND, op, { key, ...(value === undefined ? {} : { value }), ...extra });
  const body = { name: key, env: 'prod', ...(value === undefined ? {} : { value }), ...(extra.version === undefined ? {} : { version: extra.version }) };
  settleWrite(ctx.history, s, token, op, id, await call(ctx, token, vaultOp, body));
}

/** A read: `{value, version}`, or `{absent: true}` on the vault's 404. */
async function read(ctx: WorkloadContext, s: State, token: string, key: string, final: boolean): Promise<{ value: string; version: number } | 'absent' | null> {
  const h = ctx.history;
  const id = h.invoke(KIND, 'read', { key, ...(final ? { final: true } : {}) });
  const reply = await call(ctx, token, 'RetrieveSecret', { name: key, env: 'prod' });
  if ('error' in reply) {
    h.unknown(KIND, 'read', id, { error: reply.error });
    return null;
  }
  const a = reply.answer;
  if (succeeded(a) && typeof a.json.data.data?.value === 'string') {
    const found = { value: a.json.data.data.value as string, version: Number(a.header('x-pier-secret-version')) };
    h.ok(KIND, 'read', id, found);
    return found;
  }
  if (a.status === 404 && /not found/.test(message(a))) {
    h.ok(KIND, 'read', id, { absent: true });
    return 'absent';
  }
  if (a.status >= 400 && a.status < 500) {
    if (a.status === 401) s.access.invalidate(token);
    h.fail(KIND, 'read', id, { status: a.status, message: message(a) });
  } else h.unknown(KIND, 'read', id, { status: a.status, message: message(a) });
  return null;
}

async function list(ctx: WorkloadContext, s: State, token: string): Promise<void> {
  const h = ctx.history;
  const id = h.invoke(KIND, 'list', {});
  const reply = await call(ctx, token, 'ListSecret', { env: 'prod' });
  if ('error' in reply) return h.unknown(KIND, 'list', id, { error: reply.error });
  const a = reply.answer;
  if (succeeded(a) && Array.isArray(a.json.data.data)) {
    const values: Record<string, string> = {};
    for (const e of a.json.data.data as Array<{ name: string; value: string }>) values[e.name] = e.value;
    return h.ok(KIND, 'list', id, { values });
  }
  if (a.status >= 400 && a.status < 500) {
    if (a.status === 401) s.access.invalidate(token);
    return h.fail(KIND, 'list', id, { status: a.status, message: message(a) });
  }
  h.unknown(KIND, 'list', id, { status: a.status, message: message(a) });
}

async function worker(ctx: WorkloadContext, s: State, rng: Rng): Promise<void> {
  for (let i = 0; i < MAX_OPS_PER_WORKER && Date.now() < ctx.deadline; i++) {
    let token: string;
    try {
      token = await s.access.get();
    } catch {
      await sleep(500); // renewal failed (recorded by the cache): the cluster is busy with a fault
      continue;
    }
    const key = rng.pick(VAULT_KEYS);
    const roll = rng.next();
    if (roll < 0.18) await write(ctx, s, token, 'create', key);
    else if (roll < 0.33) await write(ctx, s, token, 'update', key);
    else if (roll < 0.43) {
      // Check-and-set: the version (and value) a read saw, then an update from that version only.
      const seen = await read(ctx, s, token, key, false);
      if (seen && seen !== 'absent' && Number.isInteger(seen.version)) await write(ctx, s, token, 'update', key, { version: seen.version, base: seen.value });
    } else if (roll < 0.68) await read(ctx, s, token, key, false);
    else if (roll < 0.78) await list(ctx, s, token);
    else await write(ctx, s, token, 'delete', key);
    await sleep(rng.int(0, 30));
  }
}

export const workload: Workload = {
  name: 'vault',

  async setup(ctx) {
    const added = await adminSettled(ctx.cluster, 'POST', '/admin/v1/users', { name: USER });
    if (added.status !== 200 && added.status !== 409) throw new Error(`vault setup: user add answered ${added.status} ${added.text}`);
    let installed = await adminSettled(ctx.cluster, 'POST', '/admin/v1/apps', { user: USER, manifest: MANIFEST });
    if (installed.status === 409) {
      // An earlier attempt went through without our seeing its answer: install again to learn the credentials.
      await adminSettled(ctx.cluster, 'DELETE', `/admin/v1/apps/${USER}/${APP}`);
      installed = await adminSettled(ctx.cluster, 'POST', '/admin/v1/apps', { user: USER, manifest: MANIFEST });
    }
    if (installed.status !== 200) throw new Error(`vault setup: install answered ${installed.status} ${installed.text}`);
    const env = installed.json.data.env as { OS_APP_KEY: string; OS_APP_SECRET: string };
    const access = new AccessCache(ctx.cluster.url('system'), { key: env.OS_APP_KEY, secret: env.OS_APP_SECRET }, vaultPerm(WORKSPACE), (o) =>
      ctx.history.info(KIND, 'access token', o),
    );
    state = { access, seq: 0 };
    // The first token, once the token actors have heard of the app (bounded: 20 tries).
    for (let i = 0; ; i++) {
      try {
        await access.get();
        break;
      } catch (err) {
        if (i >= 20) throw new Error(`vault setup: no access token: ${errorText(err)}`);
        await sleep(500);
      }
    }
    ctx.log(`user ${USER}, app ${APP}, ${VAULT_KEYS.length} keys, ${WORKERS} workers`);
  },

  async run(ctx) {
    const s = state;
    if (!s) throw new Error('vault: run before setup');
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(ctx, s, ctx.rng.fork(`worker-${w}`))));
  },

  /**
   * Every key read again, each retried (bounded) until the healed cluster answers; `FINAL_ROUNDS`
   * rounds, so that both vault replicas are likely asked (replicas that disagree show up here).
   */
  async settle(ctx) {
    const s = state;
    if (!s) return;
    const until = Date.now() + FINAL_READ_MS;
    for (let round = 0; round < FINAL_ROUNDS; round++) for (const key of VAULT_KEYS) {
      for (let attempt = 0; attempt < FINAL_READ_ATTEMPTS && Date.now() < until; attempt++) {
        let token: string;
        try {
          token = await s.access.get();
        } catch {
          await sleep(1_000);
          continue;
        }
        if ((await read(ctx, s, token, key, true)) !== null) break;
        await sleep(500);
      }
    }
  },
};

export const check = checkVault;
