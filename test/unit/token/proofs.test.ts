import test from 'ava';
import { permKey, VerifiedProofs } from '../../../actors/token/handler.js';

const perm = (ops: string[]) => ({ dataType: 'd', group: 'g', version: 'v2', ops });

test('a verified proof is answered again for the same perm without a second verification', async (t) => {
  const proofs = new VerifiedProofs();
  let verifications = 0;
  const verify = async () => (verifications++, true);
  t.is(await proofs.check('p', permKey(perm(['a'])), 2_000, 1_000, verify), 'verified');
  t.is(await proofs.check('p', permKey(perm(['a', 'a'])), 2_000, 1_500, verify), 'verified');
  t.is(verifications, 1);
});

test('the same proof with another perm is reused, never verified again', async (t) => {
  const proofs = new VerifiedProofs();
  let verifications = 0;
  const verify = async () => (verifications++, true);
  await proofs.check('p', permKey(perm(['a'])), 2_000, 1_000, verify);
  t.is(await proofs.check('p', permKey(perm(['a', 'b'])), 2_000, 1_100, verify), 'reused');
  t.is(await proofs.check('p', permKey({ ...perm(['a']), group: 'other' }), 2_000, 1_100, verify), 'reused');
  t.is(verifications, 1);
});

test('concurrent requests with one proof share one verification; the first perm to finish wins', async (t) => {
  const proofs = new VerifiedProofs();
  let verifications = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const verify = async () => {
    verifications++;
    await gate;
    return true;
  };
  const first = proofs.check('p', permKey(perm(['a'])), 2_000, 1_000, verify);
  const second = proofs.check('p', permKey(perm(['b'])), 2_000, 1_000, verify);
  release();
  t.deepEqual(await Promise.all([first, second]), ['verified', 'reused']);
  t.is(verifications, 1);
});

test('an invalid proof is not remembered; an expired entry is verified afresh', async (t) => {
  const proofs = new VerifiedProofs();
  t.is(await proofs.check('p', 'x', 2_000, 1_000, async () => false), 'invalid');
  t.is(await proofs.check('p', 'y', 2_000, 1_000, async () => true), 'verified');
  t.is(await proofs.check('p', 'z', 4_000, 2_000, async () => true), 'verified', 'past its window, the entry is gone');
});

test('the cache is bounded: past maxEntries the oldest go', async (t) => {
  const proofs = new VerifiedProofs(3);
  for (const k of ['a', 'b', 'c', 'd']) await proofs.check(k, 'x', 10_000, 1_000, async () => true);
  let verified = 0;
  await proofs.check('a', 'x', 10_000, 1_000, async () => (verified++, true));
  t.is(verified, 1, 'a was evicted and verified again');
});
