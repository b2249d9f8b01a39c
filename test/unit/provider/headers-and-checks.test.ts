import test from 'ava';
import { randomBytes } from 'node:crypto';
import { authorise, type ProviderDeps } from '../../../actors/provider/handler.js';
import { requestHeaders, responseHeaders } from '../../../actors/provider/headers.js';
import type { AppView, ProviderView } from '../../../bus/subjects.js';
import { AccessTokens } from '../../../lib/crypto/access-token.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';

test('what a provider sees: content headers pass, credentials and Pier-only headers never; Pier says who calls', (t) => {
  const out = requestHeaders(
    {
      'content-type': 'application/json',
      'x-trace': 'abc',
      connection: 'keep-alive, x-hop',
      'x-hop': 'dropped by connection',
      host: 'pier',
      'content-length': '10',
      'x-access-token': 'pat1.x.y',
      'x-authorization': 'pier_user',
      cookie: 'auth_token=x',
      authorization: 'Bearer x',
      'x-app-key': 'ak',
      'x-app-secret': 's',
      'x-pier-caller': 'forged',
      'x-bfl-user': 'forged',
      'x-forwarded-for': '1.2.3.4',
      forwarded: 'for=1.2.3.4',
      'x-real-ip': '1.2.3.4',
    },
    { app: 'chat', user: 'alice', address: '10.0.0.7' },
  );
  t.deepEqual(out, { 'content-type': 'application/json', 'x-trace': 'abc', 'x-pier-caller': 'chat', 'x-bfl-user': 'alice', 'x-forwarded-for': '10.0.0.7' });
  t.deepEqual(responseHeaders({ 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'transfer-encoding': 'chunked', date: 'x', connection: 'close' }), { 'content-type': 'text/plain', 'set-cookie': 'a=1, b=2' });
  // A Connection header naming one header drops it (either way), whatever its case and spacing.
  t.deepEqual(requestHeaders({ connection: ' X-Hop ', 'x-hop': 'dropped', 'x-kept': 'kept' }, { app: 'chat', user: 'alice', address: '10.0.0.7' }), { 'x-kept': 'kept', 'x-pier-caller': 'chat', 'x-bfl-user': 'alice', 'x-forwarded-for': '10.0.0.7' });
  t.deepEqual(responseHeaders({ connection: 'X-Hop', 'x-hop': 'dropped', 'keep-alive': 'timeout=5', 'content-type': 'text/plain' }), { 'content-type': 'text/plain' });
});

const app: AppView = { id: 'alice/chat', user: 'alice', name: 'chat', version: '1', host: 'h', appKey: 'ak_1', installedAt: '', grants: [], websocket: null, upload: null, providers: [] };
const notes: ProviderView = {
  name: 'provider-notes', user: 'alice', app: 'notes', namespace: 'user-system-alice', version: 'v2', dataType: 'legacy_notes', group: 'api.notes',
  endpoint: '127.0.0.1:1', deployment: '', description: '', opApis: [{ name: 'getNote', uri: '/n' }], state: 'active',
} as ProviderView;

test('a call is checked in the contract order: token (401), op (403), provider (404)', (t) => {
  const tokens = new AccessTokens(new Keyring(randomBytes(32)));
  let installed: AppView | undefined = app;
  const deps = {
    tokens,
    now: () => 1_000,
    cache: { app: () => installed, activeProvider: (_u: string, d: string) => (d === 'legacy_notes' ? notes : undefined) } as unknown as RegistryCache,
  } as unknown as ProviderDeps;
  const token = tokens.sign({ app: 'alice/chat', key: 'ak_1', dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'ghost'], iat: 0, exp: 2_000 });
  const call = (over: Record<string, string> = {}) => {
    try {
      authorise(deps, { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', op: 'getNote', accessToken: token, ...over });
      return 'ok';
    } catch (e) {
      return `${(e as { code: string }).code}: ${(e as Error).message}`;
    }
  };
  t.is(call(), 'ok');
  t.is(call({ accessToken: '' }), 'UNAUTHORIZED: X-Access-Token header is required');
  t.is(call({ accessToken: `${token}x` }), 'UNAUTHORIZED: access token is invalid');
  t.is(call({ op: 'listNotes' }), 'FORBIDDEN: op "listNotes" of legacy_notes/api.notes/v2 is not granted by this access token');
  t.is(call({ op: 'ghost' }), 'NOT_FOUND: no active provider serves legacy_notes/api.notes/v2 with op "ghost"');
  installed = { ...app, appKey: 'ak_reinstalled' };
  t.is(call(), 'UNAUTHORIZED: access token is no longer valid: its app was uninstalled or reinstalled');
  (deps as { now: () => number }).now = () => 2_000;
  installed = app;
  t.regex(call({ accessToken: tokens.sign({ app: 'alice/chat', key: 'ak_1', dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote'], iat: 0, exp: 1_500 }) }), /^UNAUTHORIZED: access token has expired/);
});
