import { vaultPerm } from '../../test/helpers/app-client.js';
import type { History } from '../history.js';
import type { Rng } from '../random.js';
import { AccessCache, admin, adminSettled, errorText, jsonFetch, sleep, type Answer } from '../vault-http.js';
import type { Workload, WorkloadContext } from '../workload.js';
import { checkVault } from '../checks/vault.js';
import { destroyedValues, judgeShredding } from '../vault-shred.js';

/**
 * The vault as an app uses it, under faults: one user, one app granted every op on one workspace,
 * `WORKERS` concurrent workers doing create / update / check-and-set update / read / list / delete,
 * and on earlier versions restore / read of a version, on `KEYS` names through the system listener
 * behind haproxy, with one shared access token; now and then the operator undeletes a key or
 * destroys a deleted key or one earlier version (admin API). Every written value is unique, so the
 * checker knows which write a read saw (a restore or an undelete only brings back one written
 * before). History lines (kind `vault`): `create|update {key, value[, version, base]}`, `delete
 * {key}`, `read {key[, final]}` → `{value, version}` or `{absent: true}`, `list` → `{values: {name:
 * value}}`, `restore {key, version}` → `{version}` (the new one), `readVersion {key, version}` →
 * `{value, version}` or `{absent: true}` (not kept, or no such secret), `undelete {key}` →
 * `{version}`, `destroy {key[, version]}` (without a version: the deleted secret whole) →
 * `{destroyed: [versions]}`. A 4xx is `fail` (no effect), a 5xx, a non-answer or a deadline `unknown`.
 */
const KIND = 'vault';
const USER = 'vaultu';
const APP = 'vaultapp';
const WORKSPACE = 'chaos';
export const VAULT_KEYS = Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, '0')}`);
/**
 * destroyEarly's key, which the random mix never picks: no create, restore or write of unknown
 * outcome from another worker can blur which value its destroyed version held, so the shredding
 * check (vault-shred.ts) always has a value to judge. On a mixed key a 60 s run once left it none.
 */
const DESTROY_KEY = 'kdestroy';
/** Every key the run writes: what the final reads and the shredding check cover. */
const ALL_KEYS = [...VAULT_KEYS, DESTROY_KEY];
const WORKERS = 4;
const MAX_OPS_PER_WORKER = 100_000;
const FINAL_READ_ATTEMPTS = 40;
const FINAL_READ_MS = 90_000;
const FINAL_ROUNDS = 3;

/** The five operations, and the three on versions, which an app has only when its manifest declares them. */
const PLATFORM_OPS = ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret'];
const VERSION_OPS = ['ListSecretVersions', 'RetrieveSecretVersion', 'RestoreSecretVersion'];

const manifestOf = (ops: readonly string[]) =>
  [
    `metadata: { name: ${APP}, version: '1' }`,
    'permission:',
    '  sysData:',
    `    - { dataType: secret, group: secret.vault, version: v1, ops: [${ops.map((o) => `${o}?workspace=${WORKSPACE}`).join(', ')}] }`,
    '',
  ].join('\n');

interface State {
  access: AccessCache;
  seq: number;
  /**
   * Whether the app has the version operations: a release before them (the first half of `npm run
   * upgrade`) refuses a manifest that names them, and the app is installed with the five alone.
   */
  versions: boolean;
  /**
   * The newest version any answer showed per key: where restore, readVersion and destroy pick a
   * version from (most picks are then of a version likely kept). A hint for choosing, never a
   * fact the history relies on.
   */
  newest: Map<string, number>;
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

/**
 * Remembers the newest version an answer showed for `key` (State.newest); `restart` for a create or
 * an undelete, whose generation may number its versions lower than the one before.
 */
function saw(s: State, key: string, version: number | null, restart = false): void {
  if (version === null || !Number.isInteger(version)) return;
  if (restart || version > (s.newest.get(key) ?? 0)) s.newest.set(key, version);
}

/** Records a write's outcome: 200 ok, 4xx refused (no effect), anything else unknown. */
function settleWrite(h: History, s: State, token: string, op: string, id: string, key: string, reply: Reply): void {
  if ('error' in reply) return h.unknown(KIND, op, id, { error: reply.error });
  const a = reply.answer;
  if (succeeded(a)) {
    const version = Number(a.header('x-pier-secret-version')) || null;
    saw(s, key, version, op === 'create');
    return h.ok(KIND, op, id, { version });
  }
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
  settleWrite(ctx.history, s, token, op, id, key, await call(ctx, token, vaultOp, body));
}

/** A version of `key` to restore, read or destroy: one of the few before the newest seen, or the newest itself now and then. */
function pickVersion(s: State, rng: Rng, key: string): number {
  const newest = s.newest.get(key) ?? 1;
  return rng.chance(0.1) ? newest : rng.int(Math.max(1, newest - 4), Math.max(1, newest - 1));
}

/** RestoreSecretVersion: a new version with `version`'s value (which value it was, only later reads show). */
async function restoreVersion(ctx: WorkloadContext, s: State, token: string, key: string, version: number): Promise<boolean> {
  const id = ctx.history.invoke(KIND, 'restore', { key, version });
  const reply = await call(ctx, token, 'RestoreSecretVersion', { name: key, env: 'prod', version });
  settleWrite(ctx.history, s, token, 'restore', id, key, reply);
  return 'answer' in reply && succeeded(reply.answer);
}

/** RetrieveSecretVersion: `{value, version}`, or `{absent: true}` on the vault's 404 (not kept, or no such secret). */
async function readVersion(ctx: WorkloadContext, s: State, token: string, key: string, version: number): Promise<void> {
  const h = ctx.history;
  const id = h.invoke(KIND, 'readVersion', { key, version });
  const reply = await call(ctx, token, 'RetrieveSecretVersion', { name: key, env: 'prod', version });
  if ('error' in reply) return h.unknown(KIND, 'readVersion', id, { error: reply.error });
  const a = reply.answer;
  if (succeeded(a) && typeof a.json.data.data?.value === 'string') {
    saw(s, key, Number(a.header('x-pier-secret-version')));
    return h.ok(KIND, 'readVersion', id, { value: a.json.data.data.value as string, version: Number(a.json.data.data.version) });
  }
  if (a.status === 404 && /not found|not kept/.test(message(a))) return h.ok(KIND, 'readVersion', id, { absent: true, message: message(a) });
  if (a.status >= 400 && a.status < 500) {
    if (a.status === 401) s.access.invalidate(token);
    return h.fail(KIND, 'readVersion', id, { status: a.status, message: message(a) });
  }
  h.unknown(KIND, 'readVersion', id, { status: a.status, message: message(a) });
}

/**
 * The operator's undelete or destroy (admin API, no retry: a retried call would blur what was
 * acknowledged): 2xx ok with the answer's `version` or `destroyed`, 4xx fail, anything else unknown.
 */
async function operator(ctx: WorkloadContext, s: State, op: 'undelete' | 'destroy', key: string, version?: number): Promise<boolean> {
  const h = ctx.history;
  const id = h.invoke(KIND, op, { key, ...(version === undefined ? {} : { version }) });
  const query = new URLSearchParams({ user: USER, workspace: WORKSPACE, env: 'prod', name: key });
  let a: Answer;
  try {
    a = await admin(ctx.cluster, 'POST', `/admin/v1/vault/secret/${op}?${query}`, op === 'destroy' ? (version === undefined ? {} : { version }) : undefined);
  } catch (err) {
    h.unknown(KIND, op, id, { error: errorText(err) });
    return false;
  }
  const data = a.json?.data;
  if (a.status === 200 && a.json?.code === 0 && data) {
    if (op === 'undelete') saw(s, key, Number(data.version), true);
    h.ok(KIND, op, id, op === 'undelete' ? { version: Number(data.version) } : { destroyed: Array.isArray(data.destroyed) ? data.destroyed : [] });
    return true;
  }
  if (a.status >= 400 && a.status < 500) h.fail(KIND, op, id, { status: a.status, message: message(a) });
  else h.unknown(KIND, op, id, { status: a.status, message: message(a) });
  return false;
}

/**
 * Early in each run, whatever the random mix reaches: a key of its own (DESTROY_KEY) written three
 * times, its second newest version destroyed (tried a few times until acknowledged) and read back,
 * so the destroy and shredding checks always have something to judge (a 60 s run on a loaded host
 * once made no destroy at all).
 */
async function destroyEarly(ctx: WorkloadContext, s: State, deadline = ctx.deadline): Promise<void> {
  if (!s.versions) return;
  const key = DESTROY_KEY;
  for (let attempt = 0; attempt < 5 && Date.now() < deadline; attempt++) {
    let token: string;
    try {
      token = await s.access.get();
    } catch {
      await sleep(500);
      continue;
    }
    await write(ctx, s, token, 'create', key);
    await write(ctx, s, token, 'update', key);
    await write(ctx, s, token, 'update', key);
    const version = (s.newest.get(key) ?? 2) - 1;
    if (version >= 1 && (await operator(ctx, s, 'destroy', key, version))) {
      await readVersion(ctx, s, token, key, version);
      return;
    }
    await sleep(500);
  }
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
    saw(s, key, found.version);
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
    // The mix before versions (create .18, update .15, check-and-set .10, read .25, list .10, delete
    // .22), scaled to .84, then restore .06, readVersion .06, undelete .02, destroy .02.
    if (roll < 0.15) await write(ctx, s, token, 'create', key);
    else if (roll < 0.28) await write(ctx, s, token, 'update', key);
    else if (roll < 0.36) {
      // Check-and-set: the version (and value) a read saw, then an update from that version only.
      const seen = await read(ctx, s, token, key, false);
      if (seen && seen !== 'absent' && Number.isInteger(seen.version)) await write(ctx, s, token, 'update', key, { version: seen.version, base: seen.value });
    } else if (roll < 0.57) await read(ctx, s, token, key, false);
    else if (roll < 0.65) await list(ctx, s, token);
    else if (roll < 0.84) await write(ctx, s, token, 'delete', key);
    else if (!s.versions) await read(ctx, s, token, key, false);
    else if (roll < 0.9) {
      // What the restore brought back is for a read to show: half the time one follows at once.
      if ((await restoreVersion(ctx, s, token, key, pickVersion(s, rng, key))) && rng.chance(0.5)) await read(ctx, s, token, key, false);
    } else if (roll < 0.96) await readVersion(ctx, s, token, key, pickVersion(s, rng, key));
    else if (roll < 0.98) await operator(ctx, s, 'undelete', key);
    else await operator(ctx, s, 'destroy', key, rng.chance(0.5) ? undefined : pickVersion(s, rng, key));
    await sleep(rng.int(0, 30));
  }
}

export const workload: Workload = {
  name: 'vault',

  async setup(ctx) {
    const added = await adminSettled(ctx.cluster, 'POST', '/admin/v1/users', { name: USER });
    if (added.status !== 200 && added.status !== 409) throw new Error(`vault setup: user add answered ${added.status} ${added.text}`);
    const install = async (ops: readonly string[]) => {
      let installed = await adminSettled(ctx.cluster, 'POST', '/admin/v1/apps', { user: USER, manifest: manifestOf(ops) });
      if (installed.status === 409) {
        // An earlier attempt went through without our seeing its answer: install again to learn the credentials.
        await adminSettled(ctx.cluster, 'DELETE', `/admin/v1/apps/${USER}/${APP}`);
        installed = await adminSettled(ctx.cluster, 'POST', '/admin/v1/apps', { user: USER, manifest: manifestOf(ops) });
      }
      return installed;
    };
    let ops = [...PLATFORM_OPS, ...VERSION_OPS];
    let installed = await install(ops);
    // Refused naming the ops past the five (permission.sysData[0].ops[5] and on): nothing else differs.
    if (installed.status === 400 && installed.text.includes(`ops[${PLATFORM_OPS.length}]`)) {
      // A registry of a release before versions: the five alone (and no version operation in the mix).
      ops = PLATFORM_OPS;
      installed = await install(ops);
    }
    if (installed.status !== 200) throw new Error(`vault setup: install answered ${installed.status} ${installed.text}`);
    const env = installed.json.data.env as { OS_APP_KEY: string; OS_APP_SECRET: string };
    const access = new AccessCache(ctx.cluster.url('system'), { key: env.OS_APP_KEY, secret: env.OS_APP_SECRET }, vaultPerm(WORKSPACE, ops), (o) =>
      ctx.history.info(KIND, 'access token', o),
    );
    state = { access, seq: 0, newest: new Map(), versions: ops.length > PLATFORM_OPS.length };
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
    ctx.log(`user ${USER}, app ${APP}, ${VAULT_KEYS.length} keys, ${WORKERS} workers${state.versions ? '' : ' (no version operations: this release refuses them)'}`);
  },

  async run(ctx) {
    const s = state;
    if (!s) throw new Error('vault: run before setup');
    await Promise.all(Array.from({ length: WORKERS }, async (_, w) => {
      if (w === 0) await destroyEarly(ctx, s);
      await worker(ctx, s, ctx.rng.fork(`worker-${w}`));
    }));
  },

  /**
   * Every key read again, each retried (bounded) until the healed cluster answers; `FINAL_ROUNDS`
   * rounds, so that both vault replicas are likely asked (replicas that disagree show up here).
   */
  async settle(ctx) {
    const s = state;
    if (!s) return;
    // Faults can have refused or blurred every destroy of the run: once more on the healed cluster
    // before the final reads, so the shredding check below has a value to judge.
    if (destroyedValues(ctx.history.lines).destroyed.length === 0) await destroyEarly(ctx, s, Date.now() + FINAL_READ_MS);
    const until = Date.now() + FINAL_READ_MS;
    for (let round = 0; round < FINAL_ROUNDS; round++) for (const key of ALL_KEYS) {
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
    // What the streams still hold of destroyed values (vault-shred.ts): judged by checks/vault.ts.
    await judgeShredding(ctx, USER, WORKSPACE, ALL_KEYS).catch((err: unknown) => ctx.history.info(KIND, 'shred', { error: errorText(err) }));
  },
};

export const check = checkVault;
