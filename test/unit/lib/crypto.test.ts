import test from 'ava';
import { randomBytes } from 'node:crypto';
import { PierError } from '../../../bus/errors.js';
import { AccessTokens } from '../../../lib/crypto/access-token.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { FailureLimiter } from '../../../lib/policy/rate-limit.js';
import { open, seal } from '../../../lib/crypto/secret-box.js';

test('sealed values open only with their key and their context', (t) => {
  const key = randomBytes(32);
  const box = seal(key, Buffer.from('secret'), 'ctx/a');
  t.is(open(key, box, 'ctx/a').toString(), 'secret');
  t.throws(() => open(key, box, 'ctx/b'), { instanceOf: PierError });
  t.throws(() => open(randomBytes(32), box, 'ctx/a'), { instanceOf: PierError });
  t.notDeepEqual(seal(key, Buffer.from('secret'), 'ctx/a'), box, 'a fresh nonce each time');
});

test('a keyring opens what the previous key sealed, and knows it is stale', (t) => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);
  const old = new Keyring(k1).seal(Buffer.from('v'), 'c');
  const rotating = new Keyring(k2, k1);
  t.is(rotating.open(old, 'c').toString(), 'v');
  t.true(rotating.isStale(old));
  t.false(rotating.isStale(rotating.seal(Buffer.from('v'), 'c')));
  t.throws(() => new Keyring(k2).open(old, 'c'), { message: /master key this process does not have/ });
});

test('access tokens: signed, bound to their claims, expiring, verifiable under the previous key during a rotation', (t) => {
  const k1 = randomBytes(32);
  const tokens = new AccessTokens(new Keyring(k1));
  const claims = { app: 'alice/chat', key: 'ak_x', dataType: 'd', group: 'g', version: 'v2', ops: ['op'], iat: 1000, exp: 301_000 };
  const token = tokens.sign(claims);
  t.deepEqual(tokens.verify(token, 2000), claims);
  t.throws(() => tokens.verify(token, 301_000), { message: 'access token has expired' });
  const [p, payload, mac] = token.split('.');
  const forged = Buffer.from(JSON.stringify({ ...claims, ops: ['op', 'more'] })).toString('base64url');
  t.throws(() => new AccessTokens(new Keyring(k1)).verify(`${p}.${forged}.${mac}`, 2000), { message: 'access token is invalid' });
  // Checked tokens are remembered by their end (the MAC): one ending alike is checked whole all the same.
  t.throws(() => tokens.verify(`${p}.${forged}.${mac}`, 2000), { message: 'access token is invalid' }, 'the genuine one remembered');
  t.deepEqual(tokens.verify(token, 2000), claims, 'and still remembered');
  t.throws(() => new AccessTokens(new Keyring(randomBytes(32))).verify(token, 2000), { message: 'access token is invalid' });
  t.deepEqual(new AccessTokens(new Keyring(randomBytes(32), k1)).verify(token, 2000), claims);
  t.truthy(payload);
});

test('failure limiter: blocks past the limit within the window, forgets after it', (t) => {
  let now = 0;
  const limiter = new FailureLimiter(3, 1000, () => now);
  for (let i = 0; i < 3; i++) {
    t.false(limiter.blocked('k'));
    limiter.fail('k');
  }
  t.true(limiter.blocked('k'));
  t.false(limiter.blocked('other'));
  now = 1000;
  t.false(limiter.blocked('k'));
});
