import { exchange } from '../../../bus/exchange.js';
import { ask, serve } from '../../../bus/verbs.js';
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import type { Bus, BusMessage, BusSealing } from '../../../bus/bus.js';
import { KeyPair, Sealer } from '../../../bus/seal.js';
import { PierError } from '../../../bus/errors.js';
import { roleSeed, RoleKeys } from '../../../lib/crypto/bus-anchors.js';

test('a box opens only with the recipient\'s key and only as what it was made for', (t) => {
  const a = new Sealer(KeyPair.generate());
  const b = new Sealer(KeyPair.generate());
  const box = a.seal(Buffer.from('the secret'), b.self.publicKey, 'pier.vault.op|reply');
  t.is(b.open(box, 'pier.vault.op|reply').plain.toString(), 'the secret');
  t.is(b.open(box, 'pier.vault.op|reply').sender, a.self.publicKey);
  t.false(Buffer.from(box).includes(Buffer.from('the secret')));
  t.throws(() => b.open(box, 'pier.registry.app.credentials|reply'), { message: /does not open/ });
  t.throws(() => new Sealer(KeyPair.generate()).open(box, 'pier.vault.op|reply'), { message: /does not open/ });
  const tampered = Buffer.from(box);
  tampered[tampered.length - 20] ^= 1;
  t.throws(() => b.open(tampered, 'pier.vault.op|reply'), { message: /does not open/ });
  t.throws(() => b.open(new Uint8Array([1, 2, 3]), 'x'), { message: /not a sealed box/ });
  t.throws(() => a.seal(Buffer.from('x'), 'not a key', 'x'), { message: /recipient/ });
});

test('role keys come from the master key: the same in every replica, one per role, the previous key\'s during a rotation', (t) => {
  const master = randomBytes(32);
  const roleKeyPairs = (masters: Buffer[], role: 'vault' | 'registry') => masters.map((m) => new RoleKeys(roleSeed(m, role)).seal);
  const one = roleKeyPairs([master], 'vault');
  const two = roleKeyPairs([master], 'vault');
  t.is(one[0].publicKey, two[0].publicKey);
  t.not(roleKeyPairs([master], 'registry')[0].publicKey, one[0].publicKey);
  const rotated = roleKeyPairs([randomBytes(32), master], 'vault');
  t.is(rotated.length, 2);
  t.is(rotated[1].publicKey, one[0].publicKey);
  // A box sealed to the old role key opens in a replica that has moved on to the new master key.
  const edge = new Sealer(KeyPair.generate());
  const vault = new Sealer(KeyPair.generate());
  t.is(vault.open(edge.seal(Buffer.from('v'), one[0].publicKey, 'c'), 'c', rotated).plain.toString(), 'v');
});

/** A bus that records every payload it carries (what a reader of the wire would see), with sealing. */
class WireBus implements Bus {
  readonly kind = 'nats' as const;
  readonly wire: Uint8Array[] = [];
  constructor(
    private readonly inner: MemoryBus,
    readonly sealing: BusSealing | undefined,
  ) {}
  publish(subject: string, data: Uint8Array, options?: Parameters<Bus['publish']>[2]) {
    this.wire.push(data);
    this.inner.publish(subject, data, options);
  }
  subscribe(subject: string, handler: (m: BusMessage) => void, options?: { queue?: string }) {
    return this.inner.subscribe(subject, handler, options);
  }
  async request(subject: string, data: Uint8Array, options: Parameters<Bus['request']>[2]) {
    this.wire.push(data);
    const reply = await this.inner.request(subject, data, options);
    this.wire.push(reply.data);
    return reply;
  }
  requestMany(subject: string, data: Uint8Array, options: Parameters<Bus['requestMany']>[2]) {
    return this.inner.requestMany(subject, data, options);
  }
  inbox() {
    return this.inner.inbox();
  }
  flush() {
    return this.inner.flush();
  }
  isConnected() {
    return true;
  }
  connectionLosses() {
    return 0;
  }
  async close() {}
}

/** A process's sealing: the role keys it holds, and the anchored key of each role (`directory`). */
function sealingOf(roles: Record<string, KeyPair[]>, directory: () => Record<string, string>): BusSealing {
  const sealer = new Sealer(KeyPair.generate());
  return {
    sealer,
    roleKeys: (r) => roles[r] ?? [],
    recipientFor: async (r) => directory()[r] ?? null,
    isAnchored: (r, key) => directory()[r] === key,
    signAs: () => null,
    signedAs: () => false,
  };
}

const secretOp = exchange<{ token: string }, { value: string }>({ subject: 'pier.test.secret', queue: 'test', request: { token: 'string' }, timeoutMs: 2_000, seal: { request: 'vault', reply: true } });

test('a sealed endpoint: request and answer cross the wire sealed; a request in clear is refused before the handler runs', async (t) => {
  const mem = new MemoryBus();
  const vaultRole = KeyPair.generate();
  const server = new WireBus(mem, sealingOf({ vault: [vaultRole] }, () => ({})));
  const client = new WireBus(mem, sealingOf({}, () => ({ vault: vaultRole.publicKey })));
  let handled = 0;
  serve(server, secretOp, (req) => {
    handled++;
    return { value: `value-for-${req.token}` };
  });
  const answer = await ask(client, secretOp, { token: 'user-token-123' });
  t.deepEqual(answer, { value: 'value-for-user-token-123' });
  const seenOnWire = [...client.wire, ...server.wire].map((d) => Buffer.from(d));
  t.false(seenOnWire.some((d) => d.includes(Buffer.from('user-token-123'))), 'the token crossed in clear');
  t.false(seenOnWire.some((d) => d.includes(Buffer.from('value-for'))), 'the answer crossed in clear');

  // A caller that does not seal (an old client, an attacker) is refused, and the handler never ran.
  const plain = new WireBus(mem, undefined);
  const refused = await ask(plain, secretOp, { token: 'x' }).catch((e: PierError) => e);
  t.true(refused instanceof PierError && refused.code === 'BAD_REQUEST', String(refused));
  t.is(handled, 1);
  // Sealed to another key: refused too.
  const wrong = new WireBus(mem, sealingOf({}, () => ({ vault: KeyPair.generate().publicKey })));
  const refused2 = await ask(wrong, secretOp, { token: 'x' }).catch((e: PierError) => e);
  t.true(refused2 instanceof PierError && /does not open/.test(refused2.message), String(refused2));
  t.is(handled, 1);
  // No replica announced yet: a clear 503, not a hang.
  const early = new WireBus(mem, sealingOf({}, () => ({})));
  const unavailable = await ask(early, secretOp, { token: 'x' }).catch((e: PierError) => e);
  t.true(unavailable instanceof PierError && unavailable.code === 'UNAVAILABLE');
});

test('on the in-process bus nothing is sealed: the same endpoint works as it always did', async (t) => {
  const mem = new MemoryBus();
  serve(mem, secretOp, (req) => ({ value: req.token }));
  t.deepEqual(await ask(mem, secretOp, { token: 'abc' }), { value: 'abc' });
});

const credentials = exchange<{ appKey: string }, { secret: string }>({ subject: 'pier.test.credentials', queue: 'test', request: { appKey: 'string' }, timeoutMs: 2_000, seal: { replyTo: 'token', grant: 'registry' } });
const pass = exchange<{ token: string }, { ok: boolean }>({ subject: 'pier.test.pass', queue: 'test', request: { token: 'string' }, timeoutMs: 2_000, seal: { request: 'vault', grant: 'vault' } });

test('a secret meant for a role is sealed to its anchored key, whoever asks: a caller announcing a key of its own gets a refusal, one without the role key cannot open it', async (t) => {
  const mem = new MemoryBus();
  const registryRole = KeyPair.generate();
  const tokenRole = KeyPair.generate();
  const anchors = () => ({ registry: registryRole.publicKey, token: tokenRole.publicKey });
  const registryBus = new WireBus(mem, sealingOf({ registry: [registryRole] }, anchors));
  serve(registryBus, credentials, () => ({ secret: 'the-app-secret' }));
  // The real token replica: holds the token role key.
  const tokenBus = new WireBus(mem, sealingOf({ token: [tokenRole] }, anchors));
  t.deepEqual(await ask(tokenBus, credentials, { appKey: 'k' }), { secret: 'the-app-secret' });
  // A thief with the token identity but no master key: it may only send a key of its own, and is refused.
  const thief = new WireBus(mem, sealingOf({ token: [KeyPair.generate()] }, anchors));
  const refused = await ask(thief, credentials, { appKey: 'k' }).catch((e: PierError) => e);
  t.true(refused instanceof PierError && /sealed only to an anchored token key/.test(refused.message), String(refused));
  // Sending the anchored token key itself: the answer comes sealed to it, and the thief cannot open it.
  const lying = new WireBus(mem, { ...sealingOf({ token: [{ ...KeyPair.generate(), raw: tokenRole.raw, publicKey: tokenRole.publicKey } as KeyPair] }, anchors) });
  const unopened = await ask(lying, credentials, { appKey: 'k' }).catch((e: PierError) => e);
  t.true(unopened instanceof PierError && /does not open/.test(unopened.message), String(unopened));
  t.false([...registryBus.wire, ...tokenBus.wire, ...thief.wire, ...lying.wire].some((d) => Buffer.from(d).includes(Buffer.from('the-app-secret'))));
});

test('a grant is believed only when made with the role\'s anchored key and bound to the request it answers', async (t) => {
  const mem = new MemoryBus();
  const vaultRole = KeyPair.generate();
  const anchors = () => ({ vault: vaultRole.publicKey });
  const edge = new WireBus(mem, sealingOf({}, anchors));
  // A forger in the vault's queue group, without the vault key: it cannot even open the request,
  // and a pass it makes with a key of its own is refused by the edge.
  const forgerKey = KeyPair.generate();
  const forger = new WireBus(mem, sealingOf({ vault: [forgerKey] }, () => ({ vault: forgerKey.publicKey })));
  const sub = serve(forger, { ...pass, seal: { grant: 'vault' } }, () => ({ ok: true }));
  const forged = await ask(edge, { ...pass, seal: { grant: 'vault' } }, { token: 't' }).catch((e: PierError) => e);
  t.true(forged instanceof PierError && forged.code === 'BAD_GATEWAY' && /not from an anchored vault key/.test(forged.message), String(forged));
  sub.unsubscribe();
  // The real vault: its pass is believed.
  const vault = new WireBus(mem, sealingOf({ vault: [vaultRole] }, anchors));
  let replies: Uint8Array[] = [];
  const real = serve(vault, pass, () => ({ ok: true }));
  t.deepEqual(await ask(edge, pass, { token: 't' }), { ok: true });
  replies = vault.wire.slice(-1);
  real.unsubscribe();
  // A real pass replayed as the answer to a later request (a fresh nonce) does not open.
  const replayer = new WireBus(mem, undefined);
  const replay = mem.subscribe('pier.test.pass', (m) => m.reply && replayer.publish(m.reply, replies[0]));
  const replayed = await ask(edge, pass, { token: 't' }).catch((e: PierError) => e);
  t.true(replayed instanceof PierError && /does not open/.test(replayed.message), String(replayed));
  replay.unsubscribe();
});
