import test from 'ava';
import { PierError } from '../../../bus/errors.js';
import { vault } from '../../../bus/subjects.js';
import { PassedGates } from '../../../edge/identity/call-gate.js';
import { isVaultCall, vaultCall, vaultCallGate, vaultCallPassed } from '../../../edge/system/vault-api.js';
import { refusal, request, responder, stubBus } from '../../helpers/edge-stubs.js';

// The vault at the edge (docs/protocol.md "Vault"): which calls are the vault's, 404/405 before any
// bus request, the body-less checks asked of the vault actor, and the answer wrapped as a v1
// provider's.

const params = (over: Record<string, string> = {}) => ({ dataType: 'secret', group: 'secret.vault', version: 'v1', op: 'RetrieveSecret', ...over });
const call = (over: Parameters<typeof request>[0] = {}) =>
  request({ method: 'post', params: params(), query: new URLSearchParams('workspace=ws1'), rawQuery: 'workspace=ws1', headers: { 'x-access-token': 'at-1', 'x-authorization': 'pier_user' }, ...over });

function setup(t: Parameters<typeof stubBus>[0]) {
  const bus = stubBus(t);
  const deps = { bus, vaultName: 'vault', gates: new PassedGates() };
  return { bus, deps };
}

test('the vault is the system call whose data type is secret, once decoded', (t) => {
  t.true(isVaultCall(call()));
  t.false(isVaultCall(call({ params: params({ dataType: 'notes' }) })));
  t.false(isVaultCall(call({ params: params({ dataType: 'Secret' }) })));
});

test('another vault or version is 404 naming it, asked of no actor', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.authorize, () => ({ until: Date.now() + 60_000 }));
  t.deepEqual(await refusal(t, vaultCallGate(deps, call({ params: params({ group: 'secret.other' }) }))), { code: 'NOT_FOUND', message: 'no vault at secret/secret.other/v1' });
  t.deepEqual(await refusal(t, vaultCallGate(deps, call({ params: params({ version: 'v2' }) }))), { code: 'NOT_FOUND', message: 'no vault at secret/secret.vault/v2' });
  t.deepEqual(await refusal(t, vaultCall(deps, call({ params: params({ version: 'v2' }) }))), { code: 'NOT_FOUND', message: 'no vault at secret/secret.vault/v2' });
  t.is(asked.length, 0);
});

test('a method other than POST is 405 with Allow: POST, before the vault is asked', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.authorize, () => ({ until: Date.now() + 60_000 }));
  const expected = { status: 405, json: { code: 405, message: 'vault operations take POST' }, headers: { allow: 'POST' } };
  t.deepEqual(await vaultCallGate(deps, call({ method: 'get' })), expected);
  t.deepEqual(await vaultCall(deps, call({ method: 'put' })), expected);
  t.is(asked.length, 0);
});

test('the gate asks vault.authorize with op, workspace, user and app; a pass is remembered', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.authorize, () => ({ until: Date.now() + 60_000 }));
  t.is(await vaultCallGate(deps, call()), null);
  t.deepEqual(asked, [{ op: 'RetrieveSecret', workspace: 'ws1', userToken: 'pier_user', accessToken: 'at-1' }]);
  t.is(await vaultCallGate(deps, call()), null);
  t.is(asked.length, 1, 'the same call again is not asked twice');
  // The user from the cookie when there is no X-Authorization; another user is another pass.
  await vaultCallGate(deps, call({ headers: { 'x-access-token': 'at-1', cookie: 'a=b; auth_token=pier_other' } }));
  t.deepEqual(asked[1], { op: 'RetrieveSecret', workspace: 'ws1', userToken: 'pier_other', accessToken: 'at-1' });
});

test("the gate's refusal is the vault's error; a timeout is asked once more", async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.authorize, (req, n) => {
    if (req.accessToken === 'at-bad') throw new PierError('FORBIDDEN', 'op RetrieveSecret?workspace=ws1 is not granted');
    if (n === 2) throw new PierError('TIMEOUT', 'a replica was dying');
    return { until: Date.now() + 60_000 };
  });
  t.deepEqual(await refusal(t, vaultCallGate(deps, call({ headers: { 'x-access-token': 'at-bad' } }))), { code: 'FORBIDDEN', message: 'op RetrieveSecret?workspace=ws1 is not granted' });
  t.is(await vaultCallGate(deps, call()), null);
  t.is(asked.length, 3, 'asked again after the timeout');
  t.is(deps.gates.size, 1, 'only the pass is remembered');
});

test('a call goes to vault.op with the parsed body; the answer is wrapped, its version in a header', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.op, () => ({ data: { name: 'k', value: 'v', env: 'prod' }, version: 3 }));
  const reply = await vaultCall(deps, call({ body: { name: 'k', env: 'prod' } }));
  t.deepEqual(asked, [{ op: 'RetrieveSecret', workspace: 'ws1', userToken: 'pier_user', accessToken: 'at-1', body: { name: 'k', env: 'prod' } }]);
  t.deepEqual(reply, {
    status: 200,
    json: { code: 0, message: 'success', data: { code: 200, message: '', data: { name: 'k', value: 'v', env: 'prod' } } },
    headers: { 'x-pier-secret-version': '3' },
  });
});

test('an empty body is {}; an answer without a version has no header', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.op, () => ({ data: [] }));
  const reply = await vaultCall(deps, call({ params: params({ op: 'ListSecret' }) }));
  t.deepEqual(asked[0].body, {});
  t.deepEqual(reply.headers, {});
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { code: 200, message: '', data: [] } });
});

test('a body that is not a JSON object is 400 naming body, and never reaches the vault', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.op, () => ({ data: '' }));
  t.deepEqual(await refusal(t, vaultCall(deps, call({ body: '{"name":' }))), { code: 'BAD_REQUEST', message: 'body: is not valid JSON' });
  t.deepEqual(await refusal(t, vaultCall(deps, call({ body: '[1]' }))), { code: 'BAD_REQUEST', message: 'body: must be a JSON object' });
  t.is(asked.length, 0);
});

test("the vault's failures pass through unwrapped, as their codes", async (t) => {
  const { bus, deps } = setup(t);
  responder(bus, vault.op, () => {
    throw new PierError('CONFLICT', 'secret "k" already exists');
  });
  t.deepEqual(await refusal(t, vaultCall(deps, call({ params: params({ op: 'CreateSecret' }), body: { name: 'k', value: 'v' } }))), { code: 'CONFLICT', message: 'secret "k" already exists' });
});

test('no vault replica running is 503 naming the role', async (t) => {
  const { deps } = setup(t);
  const { code, message } = await refusal(t, vaultCall(deps, call({ body: {} })));
  t.is(code, 'UNAVAILABLE');
  t.regex(message, /no vault replica is running/);
});

test('a pass the gate remembers is known at once (vaultCallPassed), per tokens, op and workspace; never for another vault, version or method', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, vault.authorize, () => ({ until: Date.now() + 60_000 }));
  t.false(vaultCallPassed(deps, call()), 'nothing remembered yet');
  t.is(await vaultCallGate(deps, call()), null);
  t.true(vaultCallPassed(deps, call()));
  t.false(vaultCallPassed(deps, call({ headers: { 'x-access-token': 'at-2', 'x-authorization': 'pier_user' } })), 'another access token');
  t.false(vaultCallPassed(deps, call({ headers: { 'x-access-token': 'at-1', 'x-authorization': 'pier_other' } })), 'another user token');
  t.false(vaultCallPassed(deps, call({ params: params({ op: 'ListSecret' }) })), 'another op');
  t.false(vaultCallPassed(deps, call({ query: new URLSearchParams('workspace=ws2'), rawQuery: 'workspace=ws2' })), 'another workspace');
  t.false(vaultCallPassed(deps, call({ params: params({ group: 'secret.other' }) })), 'another vault: the gate answers 404');
  t.false(vaultCallPassed(deps, call({ params: params({ version: 'v2' }) })), 'another version: 404');
  t.false(vaultCallPassed(deps, call({ method: 'get' })), 'not POST: 405');
  t.is(asked.length, 1);
});
