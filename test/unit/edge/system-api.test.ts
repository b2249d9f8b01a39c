import test from 'ava';
import { PierError } from '../../../bus/errors.js';
import { provider, token } from '../../../bus/subjects.js';
import { PassedGates } from '../../../edge/identity/call-gate.js';
import { accessToken, providerCall, providerCallGate, providerCallPassed } from '../../../edge/system/system-api.js';
import { refusal, request, responder, stubBus } from '../../helpers/edge-stubs.js';

// The system listener's app calls (docs/protocol.md "Access tokens" and docs/protocol.md "Provider calls"): the access token request checked
// here and issued by the token actor; provider calls gated before the body and handed over whole.

const params = { dataType: 'notes', group: 'notes.app', version: 'v2', op: 'Search' };

function setup(t: Parameters<typeof stubBus>[0]) {
  const bus = stubBus(t);
  return { bus, deps: { bus, providerTimeoutMs: 1_000, gates: new PassedGates() } };
}

const proof = { app_key: 'k'.repeat(16), timestamp: 1_700_000_000, token: `$2b$10$${'a'.repeat(53)}`, perm: { group: 'notes.app', dataType: 'notes', version: 'v2', ops: ['Search'] } };

test('an access token request goes to token.issue with the caller address; the answer is the success envelope', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, token.issue, () => ({ access_token: 'at-1', expired_at: '2026-01-01T00:05:00Z' }));
  const reply = await accessToken(deps, request({ method: 'post', body: proof }));
  t.deepEqual(asked, [{ ...proof, client: '192.0.2.7' }]);
  t.deepEqual(reply, { status: 200, json: { code: 0, message: 'success', data: { access_token: 'at-1', expired_at: '2026-01-01T00:05:00Z' } } });
});

test('an access token request with a bad field is 400 naming it, and never reaches the token actor', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, token.issue, () => ({ access_token: 'x', expired_at: 'y' }));
  const { code, message } = await refusal(t, accessToken(deps, request({ method: 'post', body: { ...proof, timestamp: 'now' } })));
  t.is(code, 'BAD_REQUEST');
  t.regex(message, /timestamp/);
  t.deepEqual(await refusal(t, accessToken(deps, request({ method: 'post' }))), { code: 'BAD_REQUEST', message: 'body: must be a JSON object' });
  t.is(asked.length, 0);
});

test('a provider call without X-Access-Token is 401 at the gate and at the call, asking nobody', async (t) => {
  const { bus, deps } = setup(t);
  const authorize = responder(bus, provider.authorize, () => ({ until: Date.now() + 60_000 }));
  const calls = responder(bus, provider.call, () => ({ status: 200, headers: {}, body: null, bodyStream: null }));
  const expected = { code: 'UNAUTHORIZED', message: 'X-Access-Token header is required' };
  t.deepEqual(await refusal(t, providerCallGate(deps, request({ params }))), expected);
  t.deepEqual(await refusal(t, providerCall(deps, request({ params }))), expected);
  t.is(authorize.length + calls.length, 0);
});

test('the gate asks provider.authorize for the data type, group, version and op; a pass is remembered per token', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, provider.authorize, () => ({ until: Date.now() + 60_000 }));
  const req = request({ params, headers: { 'x-access-token': 'at-1' } });
  t.is(await providerCallGate(deps, req), null);
  t.is(await providerCallGate(deps, req), null);
  t.deepEqual(asked, [{ ...params, accessToken: 'at-1' }]);
  await providerCallGate(deps, request({ params, headers: { 'x-access-token': 'at-2' } }));
  t.is(asked.length, 2, 'another token is asked');
});

test('a pass the gate remembers is known at once (providerCallPassed), per token; none without a token or before the first pass', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, provider.authorize, () => ({ until: Date.now() + 60_000 }));
  const req = request({ params, headers: { 'x-access-token': 'at-1' } });
  t.false(providerCallPassed(deps, req), 'nothing remembered yet');
  t.is(await providerCallGate(deps, req), null);
  t.true(providerCallPassed(deps, req));
  t.false(providerCallPassed(deps, request({ params, headers: { 'x-access-token': 'at-2' } })), 'another token');
  t.false(providerCallPassed(deps, request({ params: { ...params, op: 'Other' }, headers: { 'x-access-token': 'at-1' } })), 'another op');
  t.false(providerCallPassed(deps, request({ params })), 'no token');
  t.is(asked.length, 1);
});

test("the gate's refusal is the provider actor's; an unavailable replica is asked once more, then the error stands", async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, provider.authorize, () => {
    throw new PierError('UNAVAILABLE', 'replica stopping');
  });
  const req = request({ params, headers: { 'x-access-token': 'at-1' } });
  t.deepEqual(await refusal(t, providerCallGate(deps, req)), { code: 'UNAVAILABLE', message: 'replica stopping' });
  t.is(asked.length, 2);
  t.is(deps.gates.size, 0, 'a refusal is not remembered');
});

test('a provider call hands method, query, headers, caller and body to provider.call; the answer passes back as it is', async (t) => {
  const { bus, deps } = setup(t);
  const asked = responder(bus, provider.call, () => ({ status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('made'), bodyStream: null }));
  const headers = { 'x-access-token': 'at-1', 'content-type': 'application/json' };
  const reply = await providerCall(deps, request({ method: 'put', params, headers, rawQuery: 'a=1&b', body: '{"q":1}' }));
  t.is(asked.length, 1);
  const { body, ...rest } = asked[0];
  t.deepEqual(rest, { ...params, method: 'PUT', query: 'a=1&b', headers, accessToken: 'at-1', client: '192.0.2.7', bodyStream: null });
  t.is(Buffer.from(body!).toString(), '{"q":1}');
  t.is(reply.status, 201);
  t.deepEqual(reply.headers, { 'content-type': 'text/plain' });
  t.is(Buffer.from(reply.body!).toString(), 'made');
});

test("the provider actor's failure is the call's: 504 stays 504", async (t) => {
  const { bus, deps } = setup(t);
  responder(bus, provider.call, () => {
    throw new PierError('TIMEOUT', 'provider notes.app did not answer within 1000 ms');
  });
  t.deepEqual(await refusal(t, providerCall(deps, request({ params, headers: { 'x-access-token': 'at-1' } }))), { code: 'TIMEOUT', message: 'provider notes.app did not answer within 1000 ms' });
});
