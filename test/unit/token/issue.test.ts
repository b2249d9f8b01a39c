import test from 'ava';
import { randomBytes } from 'node:crypto';
import { CheckGate } from '../../../actors/token/check-gate.js';
import { issueAccessToken, VerifiedProofs, type RefusalReason, type TokenDeps } from '../../../actors/token/handler.js';
import type { AppView, IssueRequest } from '../../../bus/subjects.js';
import { AccessTokens } from '../../../lib/crypto/access-token.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { FailureLimiter } from '../../../lib/policy/rate-limit.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';

// docs/protocol.md "Access tokens", the order of the checks (cheapest first) and what each answers, with the
// registry cache and bcrypt replaced by fakes: a "hash" here is a bcrypt-shaped string standing for
// the text it was made from, so the test knows exactly which comparisons ran.
const NOW = 1_800_000_000_000;
const app: AppView = {
  id: 'alice/chat', user: 'alice', name: 'chat', version: '1', host: '127.0.0.1', appKey: 'ak_chat', installedAt: '',
  grants: [{ dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'listNotes'] }],
  websocket: null, upload: null, providers: [],
};
const SECRET = 'the-secret-of-chat-000000';

function setup() {
  const hashes = new Map<string, string>();
  const compared: string[] = [];
  const refusals: RefusalReason[] = [];
  const keyring = new Keyring(randomBytes(32), null);
  const tokens = new AccessTokens(keyring);
  const deps: TokenDeps = {
    cache: { appByKey: (k: string) => (k === app.appKey ? app : undefined) } as unknown as RegistryCache,
    secretOf: async () => SECRET,
    compare: async (plain, hash) => (compared.push(hash), hashes.get(hash) === plain),
    tokens,
    now: () => NOW,
    windowMs: 30_000,
    failuresByKey: new FailureLimiter(3, 60_000, () => NOW),
    failuresByClient: new FailureLimiter(50, 60_000, () => NOW),
    failuresPerPair: 3,
    answerWithinMs: 10_000,
    gate: new CheckGate({ maxRunningPerClient: 32, slowMs: 5 }),
    verified: new VerifiedProofs(),
    refused: (r) => refusals.push(r),
  };
  /** A bcrypt-shaped proof of `text` at `cost`. */
  const hash = (text: string, cost = 10) => {
    const h = `$2b$${String(cost).padStart(2, '0')}$${randomBytes(40).toString('base64').replace(/[+=]/g, '.').slice(0, 53)}`;
    hashes.set(h, text);
    return h;
  };
  const request = (over: Partial<IssueRequest> = {}): IssueRequest => {
    const timestamp = NOW / 1000;
    return { app_key: app.appKey, timestamp, token: hash(`${app.appKey}${timestamp}${SECRET}`), perm: { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote'] }, client: '10.0.0.1', ...over };
  };
  return { deps, tokens, compared, refusals, hash, request };
}

const refusedWith = async (p: Promise<unknown>) => p.then(() => 'issued', (e: { code: string; message: string }) => `${e.code}: ${e.message}`);

test('a good proof gets a 5-minute token for exactly the ops asked', async (t) => {
  const { deps, tokens, request } = setup();
  const issued = await issueAccessToken(deps, request({ perm: { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'getNote'] } }));
  t.is(issued.expired_at, new Date(NOW + 5 * 60_000).toISOString());
  const claims = tokens.verify(issued.access_token, NOW);
  t.deepEqual({ app: claims.app, ops: claims.ops, exp: claims.exp }, { app: 'alice/chat', ops: ['getNote'], exp: NOW + 5 * 60_000 });
});

test('cheap checks come first: a cost-13 hash, a stale timestamp or an unknown key never reach bcrypt', async (t) => {
  const { deps, compared, refusals, hash, request } = setup();
  t.is(await refusedWith(issueAccessToken(deps, request({ token: hash('x', 13) }))), 'BAD_REQUEST: token: bcrypt cost must be 4 to 12, got 13');
  t.is(await refusedWith(issueAccessToken(deps, request({ timestamp: NOW / 1000 - 31 }))), 'UNAUTHORIZED: timestamp outside the accepted window');
  t.is(await refusedWith(issueAccessToken(deps, request({ app_key: 'ak_nobody' }))), 'UNAUTHORIZED: unknown app key');
  t.deepEqual(compared, []);
  t.deepEqual(refusals, ['cost', 'timestamp', 'unknown_key']);
});

test('S-4: bad proofs under an app\'s key from its own address (a provider that knows the key, on one host) slow the right proof down, never refuse it', async (t) => {
  const { deps, request, hash, compared } = setup();
  for (let i = 0; i < 6; i++) t.is(await refusedWith(issueAccessToken(deps, request({ token: hash('wrong') }))), 'UNAUTHORIZED: token does not match the app key, timestamp and secret');
  t.is(await refusedWith(issueAccessToken(deps, request())), 'issued', 'the right proof from the same address');
  t.is(await refusedWith(issueAccessToken(deps, request({ client: '10.0.0.2' }))), 'issued', 'and from another address');
  t.is(compared.length, 8, 'every proof was checked once: slowed past the limit, none refused unchecked');
});

test('a proof buys one perm: the identical request again costs no bcrypt, another perm is refused', async (t) => {
  const { deps, compared, request } = setup();
  const first = request();
  await issueAccessToken(deps, first);
  t.is(await refusedWith(issueAccessToken(deps, first)), 'issued');
  t.is(compared.length, 1, 'answered from the verified proofs');
  t.is(await refusedWith(issueAccessToken(deps, { ...first, perm: { ...first.perm, ops: ['listNotes'] } })), 'UNAUTHORIZED: proof already used');
});

test('ops not granted are named (403)', async (t) => {
  const { deps, request } = setup();
  const r = await issueAccessToken(deps, request({ perm: { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'deleteNote', 'drop'] } })).catch((e) => e);
  t.is(r.code, 'FORBIDDEN');
  t.deepEqual(r.data, { not_granted: ['deleteNote', 'drop'] });
});
