import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ADMIN_API, type AdminRoute, type AnswerOf } from '../../edge/admin/api.js';
import type { CallInput } from '../../cli/admin-client.js';
import { adminApi } from '../helpers/admin.js';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

// Issue #52, F2 (contract §15, docs/vault.md "Versions"): an app granted only CreateSecret and
// UpdateSecret on workspace `notes` writes as fast as it can; the history of the `bank` app's
// workspace must not pay for it. On the embedded default (one process, LMDB), the bound on a user's
// history set small so that the flood goes far past it in a few seconds.
const HISTORY_BYTES = 128 * 1024;
const VALUE_BYTES = 16 * 1024;
const ADMIN_TOKEN = randomBytes(24).toString('base64url');

let dir: string;
let pier: PierProcess;
let sys: string;
let userToken: string;
const apps: Record<string, AppEnv> = {};

const admin = <R extends AdminRoute>(route: R, input?: CallInput<R>) => adminApi(pier.adminUrl, ADMIN_TOKEN, route, input);
/** An admin call's answer, or its refusal as text (so a failed assertion shows the server's words). */
const attempt = <R extends AdminRoute>(route: R, input?: CallInput<R>): Promise<AnswerOf<R> | string> =>
  admin(route, input).catch((err: Error & { status?: number }) => `refused: ${err.message}`);

const grant = (ws: string, ops: string[]) => `    - { dataType: secret, group: secret.vault, version: v1, ops: [${ops.map((o) => `${o}?workspace=${ws}`).join(', ')}] }\n`;

test.before(async () => {
  dir = tempDir('pier-hostile-history-');
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_ADMIN_TOKEN: ADMIN_TOKEN, PIER_VAULT_HISTORY_USER_BYTES: String(HISTORY_BYTES) }));
  sys = `127.0.0.1:${pier.ports!.system}`;
  userToken = (await admin(ADMIN_API.userAdd, { body: { name: 'alice' } })).token;
  const install = async (name: string, grants: string) => (await admin(ADMIN_API.appInstall, { body: { user: 'alice', manifest: `metadata: { name: ${name} }\npermission:\n  sysData:\n${grants}` } })).env;
  apps.bank = await install('bank', grant('bank', ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret']));
  apps.notes = await install('notes', grant('notes', ['CreateSecret', 'UpdateSecret']));
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

test('an app that floods its own workspace with writes trims only its own history: another app\'s kept version and deleted secret still restore and undelete', async (t) => {
  const bank = { user: userToken, access: await accessToken(apps.bank, vaultPerm('bank', ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret'])) };
  const acct = [`acct-one-${randomBytes(6).toString('hex')}`, `acct-two-${randomBytes(6).toString('hex')}`];
  const old = `old-${randomBytes(6).toString('hex')}`;
  t.is((await vaultCall(sys, 'CreateSecret', 'bank', bank, { name: 'acct', value: acct[0] })).status, 200);
  t.is((await vaultCall(sys, 'UpdateSecret', 'bank', bank, { name: 'acct', value: acct[1] })).status, 200);
  t.is((await vaultCall(sys, 'CreateSecret', 'bank', bank, { name: 'old', value: old })).status, 200);
  t.is((await vaultCall(sys, 'DeleteSecret', 'bank', bank, { name: 'old' })).status, 200);
  const target = { user: 'alice', workspace: 'bank' };
  // Before the flood: bank's history is there (so what is checked after it can be lost).
  t.like(await admin(ADMIN_API.vaultVersions, { query: { ...target, name: 'acct' } }), { version: 2, versions: [{ version: 2, current: true }, { version: 1, kept: true }] });
  t.like(await admin(ADMIN_API.vaultDeleted, { query: target }), [{ name: 'old', deletedBy: 'bank' }]);

  // The flood: only CreateSecret and UpdateSecret on `notes`, eight times the bound on the user's history.
  const notes = { user: userToken, access: await accessToken(apps.notes, vaultPerm('notes', ['CreateSecret', 'UpdateSecret'])) };
  const names = ['n0', 'n1', 'n2', 'n3'];
  const refused: string[] = [];
  let written = 0;
  for (let round = 1; round <= 16; round++) {
    for (const name of names) {
      const r = await vaultCall(sys, round === 1 ? 'CreateSecret' : 'UpdateSecret', 'notes', notes, { name, value: `${round}`.padEnd(VALUE_BYTES, 'x') });
      if (r.status !== 200) refused.push(`${name} round ${round}: ${r.status} ${r.text}`);
      written += VALUE_BYTES;
    }
  }
  t.deepEqual(refused, [], 'a full history is never a reason to refuse the current write');
  t.true(written >= 8 * HISTORY_BYTES, `${written} B written`);

  // The other app's history is whole: its kept version restores, its deleted secret comes back.
  t.like(await attempt(ADMIN_API.vaultRestore, { query: { ...target, name: 'acct' }, body: { version: 1 } }), { version: 3, restored: 1 });
  t.like(await vaultCall(sys, 'RetrieveSecret', 'bank', bank, { name: 'acct' }), { status: 200, json: { data: { data: { value: acct[0] } } } });
  t.like(await attempt(ADMIN_API.vaultUndelete, { query: { ...target, name: 'old' } }), { name: 'old', version: 1 });
  t.like(await vaultCall(sys, 'RetrieveSecret', 'bank', bank, { name: 'old' }), { status: 200, json: { data: { data: { value: old } } } });

  // The writer paid for its own flood: its oldest versions went, its newest stayed, within the bound.
  const keptBytes: number[] = [];
  for (const name of names) {
    const listed = await admin(ADMIN_API.vaultVersions, { query: { user: 'alice', workspace: 'notes', name } });
    t.is(listed.version, 16, `${name} took every write`);
    const earlier = listed.versions.filter((v) => !v.current && v.kept);
    t.false(earlier.some((v) => v.version === 1), `${name}: its oldest version went`);
    keptBytes.push(...earlier.map((v) => v.size ?? 0));
  }
  const total = keptBytes.reduce((a, b) => a + b, 0);
  t.true(total > 0 && total <= HISTORY_BYTES, `notes keeps ${total} B of history (bound ${HISTORY_BYTES})`);
});
