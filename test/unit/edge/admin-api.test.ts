import test from 'ava';
import { ErrorReasons, PierError } from '../../../bus/errors.js';
import { registry, stateEndpoints, upload, vault } from '../../../bus/subjects.js';
import { adminAnswers } from '../../../edge/admin/admin-api.js';
import { envelopedAll, type AdminDeps } from '../../../edge/admin/answers.js';
import { refusal, request, responder, stubBus } from '../../helpers/edge-stubs.js';

// The operator's API (docs/protocol.md "Admin API"): the token first, then the input checked and named,
// then one registry, vault or upload request each.

const TOKEN = 'the-admin-token-0123';
const auth = { authorization: `Bearer ${TOKEN}` };

function setup(t: Parameters<typeof stubBus>[0]) {
  const bus = stubBus(t);
  const logged: unknown[] = [];
  const deps = { bus, adminToken: TOKEN, systemServer: () => '10.0.0.1:40080', roles: [], peers: { alive: () => [], signedBy: () => undefined }, cache: {}, log: { info: (o: unknown) => logged.push(o) } } as unknown as AdminDeps;
  return { bus, admin: envelopedAll(deps, adminAnswers(deps)) };
}

test('a wrong or missing admin token is 401 before any bus request', async (t) => {
  const { bus, admin } = setup(t);
  const asked = responder(bus, registry.userList, () => []);
  for (const headers of [{}, { authorization: TOKEN }, { authorization: 'Bearer the-admin-token-0124' }] as Array<Record<string, string>>) {
    t.deepEqual(await refusal(t, () => admin.userList(request({ headers }))), { code: 'UNAUTHORIZED', message: 'admin token missing or wrong' });
  }
  t.deepEqual(await admin.userList(request({ headers: auth })), { status: 200, json: { code: 0, message: 'success', data: [] } });
  t.is(asked.length, 1);
});

test('user names in the path are checked: 400 naming user; a good one goes to the registry', async (t) => {
  const { bus, admin } = setup(t);
  const asked = responder(bus, registry.userToken, (req) => ({ name: req.name, token: 'pier_x' }));
  const { code, message } = await refusal(t, () => admin.userToken(request({ headers: auth, params: { name: 'Bad Name' } })));
  t.is(code, 'BAD_REQUEST');
  t.regex(message, /^user: must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes$/);
  t.deepEqual((await admin.userToken(request({ headers: auth, params: { name: 'alice' } }))).json, { code: 0, message: 'success', data: { name: 'alice', token: 'pier_x' } });
  t.deepEqual(asked, [{ name: 'alice' }]);
});

test('install: a bad field is 400 naming it; a good one answers the app env and its upload folder', async (t) => {
  const { bus, admin } = setup(t);
  const installs = responder(bus, registry.appInstall, (req) => ({ app: 'notes', user: req.user, appKey: 'key1', appSecret: 'secret1', uploadDest: '/notes' }));
  const prepared = responder(bus, upload.prepare, (req) => ({ dir: `/data/files/${req.user}${req.dest}` }));
  const bad = await refusal(t, () => admin.appInstall(request({ headers: auth, body: { user: 'alice', manifest: '' } })));
  t.is(bad.code, 'BAD_REQUEST');
  t.regex(bad.message, /manifest/);
  t.is((await refusal(t, () => admin.appInstall(request({ headers: auth, body: { user: 'alice', manifest: 'm', extra: 1 } })))).code, 'BAD_REQUEST', 'unknown fields are refused');
  t.is(installs.length, 0);
  const reply = await admin.appInstall(request({ headers: auth, body: { user: 'alice', manifest: 'm', sharedDest: true } }));
  t.deepEqual(installs, [{ user: 'alice', manifest: 'm', providers: [], host: '127.0.0.1', sharedDest: true }]);
  t.deepEqual(prepared, [{ user: 'alice', dest: '/notes' }]);
  t.deepEqual(reply.json, {
    code: 0,
    message: 'success',
    // The folder under its camelCase name alone (its 0.1 name went in 0.3: CHANGELOG.md).
    data: { app: 'notes', user: 'alice', env: { OS_SYSTEM_SERVER: '10.0.0.1:40080', OS_APP_KEY: 'key1', OS_APP_SECRET: 'secret1' }, uploadDir: '/data/files/alice/notes' },
  });
});

test('install with no upload role running still installs, and says why it has no folder', async (t) => {
  const { bus, admin } = setup(t);
  responder(bus, registry.appInstall, () => ({ app: 'notes', user: 'alice', appKey: 'k', appSecret: 's', uploadDest: '/notes' }));
  const data = (await admin.appInstall(request({ headers: auth, body: { user: 'alice', manifest: 'm' } }))).json as { data: Record<string, unknown> };
  t.is(data.data.uploadDir, null);
  t.regex(data.data.uploadDirError as string, /^the upload role did not create the folder: no upload replica is running/);
  t.false('upload_dir_error' in data.data, 'its 0.1 name went in 0.3');
});

test('uninstall: purge must be true or false; an app already gone with purge says how to delete its secrets', async (t) => {
  const { bus, admin } = setup(t);
  const asked = responder(bus, registry.appUninstall, (req) => {
    // As the registry answers it: the reason says what the text says (the edge decides on the reason).
    if (req.purge) throw new PierError('NOT_FOUND', 'app alice/notes is not installed', { reason: ErrorReasons.APP_UNKNOWN });
    return { app: req.app, user: req.user, purged: false };
  });
  const params = { user: 'alice', app: 'notes' };
  t.deepEqual(await refusal(t, () => admin.appUninstall(request({ headers: auth, params, query: new URLSearchParams('purge=yes') }))), { code: 'BAD_REQUEST', message: 'purge: must be true or false' });
  t.deepEqual((await admin.appUninstall(request({ headers: auth, params }))).json, { code: 0, message: 'success', data: { app: 'notes', user: 'alice', purged: false } });
  const gone = await refusal(t, () => admin.appUninstall(request({ headers: auth, params, query: new URLSearchParams('purge=true') })));
  t.is(gone.code, 'NOT_FOUND');
  t.regex(gone.message, /run pier vault purge --user alice --workspace W/);
  t.deepEqual(asked, [{ ...params, purge: false }, { ...params, purge: true }]);
});

test('vault audit: user and limit are checked and named; the limit is passed as a number', async (t) => {
  const { bus, admin } = setup(t);
  const asked = responder(bus, vault.audit, () => ({ entries: [], scanned: 0, complete: true, searchedBackTo: null }));
  const q = (s: string) => request({ headers: auth, query: new URLSearchParams(s) });
  t.deepEqual(await refusal(t, () => admin.vaultAudit(q('limit=0'))), { code: 'BAD_REQUEST', message: 'limit: must be an integer from 1 to 100000' });
  t.deepEqual(await refusal(t, () => admin.vaultAudit(q('limit=ten'))), { code: 'BAD_REQUEST', message: 'limit: must be an integer from 1 to 100000' });
  t.regex((await refusal(t, () => admin.vaultAudit(q('user=ALICE')))).message, /^user: must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes$/);
  await admin.vaultAudit(q('user=alice&limit=5'));
  await admin.vaultAudit(q(''));
  t.deepEqual(asked, [{ user: 'alice', limit: 5 }, { limit: 100 }]);
});

test('vault audit: app and op go to the vault, which searches past the newest entries; a search cut short says where it stopped', async (t) => {
  const { bus, admin } = setup(t);
  const entry = { at: '2026-11-26T10:00:00.000Z', user: 'alice', app: 'chat', op: 'RetrieveSecret', workspace: 'chat', env: 'prod', name: 'k', outcome: 'ok' };
  let complete = true;
  const asked = responder(bus, vault.audit, () => ({ entries: [entry], scanned: 200_000, complete, searchedBackTo: '2026-01-01T00:00:00.000Z' }));
  const q = (s: string) => request({ headers: auth, query: new URLSearchParams(s) });
  t.deepEqual((await admin.vaultAudit(q('app=chat&op=RetrieveSecret&limit=3'))).json, { code: 0, message: 'success', data: [entry] });
  complete = false;
  t.deepEqual((await admin.vaultAudit(q('app=(operator)&limit=3'))).json, {
    code: 0,
    message: 'success',
    data: [entry],
    searched: { entries: 200_000, backTo: '2026-01-01T00:00:00.000Z', complete: false },
  });
  t.deepEqual(asked, [{ app: 'chat', op: 'RetrieveSecret', limit: 3 }, { app: '(operator)', limit: 3 }]);
  t.regex((await refusal(t, () => admin.vaultAudit(q('app=Chat')))).message, /^app: must be 1 to 31 characters/);
});

test("the operator's vault: set needs a string value (400 naming value); the target comes from the query, the name from the path or query", async (t) => {
  const { bus, admin } = setup(t);
  const asked = responder(bus, vault.operator, (req) => ({ data: { name: req.name ?? '', env: req.env ?? 'prod', version: 1 } }));
  const query = new URLSearchParams('user=alice&workspace=ws1&env=dev');
  t.deepEqual(await refusal(t, () => admin.vaultSetByPath(request({ headers: auth, query, params: { name: 'k' }, body: { value: 7 } }))), { code: 'BAD_REQUEST', message: 'value: must be a string' });
  await admin.vaultSetByPath(request({ headers: auth, query, params: { name: 'k' }, body: { value: 'v' } }));
  await admin.vaultGet(request({ headers: auth, query: new URLSearchParams('user=alice&workspace=ws1&name=..') }));
  t.deepEqual(asked, [
    { op: 'set', user: 'alice', workspace: 'ws1', env: 'dev', name: 'k', value: 'v' },
    { op: 'get', user: 'alice', workspace: 'ws1', name: '..' },
  ]);
});

test('state import: a first batch into a registry or vault that holds state is 409; records go to their owners', async (t) => {
  const { bus, admin } = setup(t);
  let vaultEmpty = false;
  responder(bus, stateEndpoints.registryEmpty, () => ({ empty: true }));
  responder(bus, stateEndpoints.vaultEmpty, () => ({ empty: vaultEmpty }));
  const reg = responder(bus, stateEndpoints.registryImport, (req) => ({ imported: req.records.length }));
  const vlt = responder(bus, stateEndpoints.vaultImport, (req) => ({ imported: req.records.length }));
  const lines = [JSON.stringify({ kind: 'user', name: 'alice' }), JSON.stringify({ kind: 'secret', key: 'x' })].join('\n');
  const first = () => admin.stateImport(request({ headers: auth, query: new URLSearchParams('first=true'), body: lines }));
  t.is((await refusal(t, first)).code, 'CONFLICT');
  t.is(reg.length + vlt.length, 0);
  vaultEmpty = true;
  const reply = await first();
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { imported: 2 } });
  t.deepEqual(reg.map((r) => r.records.map((x) => x.kind)), [['user']]);
  t.deepEqual(vlt.map((r) => r.records.map((x) => x.kind)), [['secret']]);
  // A line that is not a record is a 400 naming its number, counted from ?line=.
  const broken = request({ headers: auth, query: new URLSearchParams('line=41'), body: `${lines}\n{"kind":"nothing"}` });
  t.deepEqual(await refusal(t, () => admin.stateImport(broken)), { code: 'BAD_REQUEST', message: 'line 43: not a state record' });
});

test('master key rotation rewraps the vault then reseals the registry, and reports both counts', async (t) => {
  const { bus, admin } = setup(t);
  const order: string[] = [];
  responder(bus, vault.rotate, () => (order.push('vault'), { rewrapped: 4 }));
  responder(bus, registry.appReseal, () => (order.push('registry'), { resealed: 2 }));
  t.deepEqual((await admin.rotateMasterKey(request({ headers: auth, method: 'post' }))).json, { code: 0, message: 'success', data: { rewrappedDataKeys: 4, resealedAppSecrets: 2, rewrapped_data_keys: 4, resealed_app_secrets: 2 } });
  t.deepEqual(order, ['vault', 'registry']);
});

test('hostile: the vault operations on versions (wire format 2) go on their own subject, whatever heartbeats claim: a replica of an earlier release never gets one; with none of this release, 503 naming it', async (t) => {
  const bus = stubBus(t);
  // What the heartbeats say (as a thief of the vault identity could): a vault of 0.2.0 lives.
  let vaults = [{ id: 'vault-old', roles: ['vault'], version: '0.2.0', wire: { speaks: 1, oldest: 1 } }];
  const peers = { alive: (role: string) => (role === 'vault' ? vaults : []), signedBy: () => undefined, mismatched: () => [] };
  const deps = { bus, adminToken: TOKEN, systemServer: () => '10.0.0.1:40080', roles: [], peers, cache: {}, log: { info: () => undefined } } as unknown as AdminDeps;
  const admin = envelopedAll(deps, adminAnswers(deps));
  // The 0.2.0 vault serves the operator's subject alone; a vault of this release serves both.
  const old = responder(bus, vault.operator, () => ({ data: [] }));
  const query = new URLSearchParams({ user: 'alice', workspace: 'chat', name: 'k' });
  const refused = await refusal(t, () => admin.vaultVersions(request({ headers: auth, query })));
  t.deepEqual(refused, {
    code: 'UNAVAILABLE',
    message: 'vault versions needs a vault replica of this release (wire format 2), and none is running: the vault replicas running are of an earlier release; finish the upgrade (docs/operations.md "Upgrading")',
  });
  t.is((await admin.vaultList(request({ headers: auth, query }))).status, 200, 'format-1 operations go on meanwhile');
  t.deepEqual(old.map((r) => r.op), ['list'], 'the earlier release was handed no operation on versions');

  const current = responder(bus, vault.versions, () => ({ data: { name: 'k', env: 'prod', version: 1, versions: [], deleted: null } }));
  t.is((await admin.vaultVersions(request({ headers: auth, query }))).status, 200, 'answered by this release\'s vault while the 0.2.0 claim still stands');
  t.is((await admin.vaultDestroy(request({ method: 'post', headers: auth, query, body: { version: 1 } }))).status, 200);
  t.deepEqual(current.map((r) => r.op), ['versions', 'destroy']);
  t.deepEqual(old.map((r) => r.op), ['list']);

  // With no vault at all, the usual words.
  vaults = [];
  const noVault: AdminDeps = { ...deps, bus: stubBus(t) };
  const alone = envelopedAll(noVault, adminAnswers(noVault));
  t.deepEqual(await refusal(t, () => alone.vaultVersions(request({ headers: auth, query }))), { code: 'UNAVAILABLE', message: 'no vault replica is running (nothing answers pier.vault.versions)' });
});
