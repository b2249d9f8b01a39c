import test from 'ava';
import { generateKeyPairSync, randomBytes, sign, verify, createPublicKey } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { decode, encode } from '../../../bus/codec.js';
import type { Heartbeat, ProcessInfo, WireWindow } from '../../../bus/subjects.js';
import { KeyPair } from '../../../bus/seal.js';
import { BusKeys } from '../../../cli/bus-keys.js';
import { anchorsFromMasterKeys, roleSeed, RoleKeys, type AnchoredRole } from '../../../lib/crypto/bus-anchors.js';
import { heartbeatSigned } from '../../../lib/runtime/heartbeat-proof.js';
import { Peers } from '../../../lib/runtime/peers.js';
import { until } from '../../helpers/wait.js';

// Issue #52, finding F5: a thief holding a role's bus identity (its `.nats.env`), but not the role's
// anchored key, announced a vault of wire format 1. Every process then withheld its goodbye (a
// stopped edge counted as gone only after the death bound) and the admin refused the vault's
// operations on versions. A heartbeat now proves its role with the role's anchored key, and only a
// proven one is believed where its claim would hold others back (lib/runtime/heartbeat-proof.ts).

const MASTER = randomBytes(32);
const anchors = anchorsFromMasterKeys([MASTER]);
/** What a process holds on a cluster with anchors: the public halves, and the keys of its anchored roles. */
const keysOf = (roles: AnchoredRole[]) => new BusKeys({ anchors, own: new Map(roles.map((r) => [r, [new RoleKeys(roleSeed(MASTER, r))]])), source: 'anchors file' });
const CURRENT: WireWindow = { speaks: 2, oldest: 1 };
const info = (id: string, role: string, wire: WireWindow): ProcessInfo => ({ id, busId: randomBytes(6).toString('hex'), roles: [role], pid: 1, host: 'h', startedAt: '', wire });
/** A death bound no test waits out: an end seen within it was said, not timed. */
const DEAD_MS = 60_000;

function peersOf(bus: MemoryBus, id: string, role: string, keys: BusKeys, wire = CURRENT, hooks: { refused?: string[]; mismatches?: string[] } = {}) {
  const p = new Peers(bus, info(id, role, wire), {
    intervalMs: 50,
    deadAfterMs: DEAD_MS,
    key: KeyPair.generate().publicKey,
    roleKeys: (r) => keys.announced(r),
    proof: keys,
    onRefused: (w) => hooks.refused?.push(w),
    onMismatch: (peer, r) => hooks.mismatches?.push(`${r} ${peer.id}`),
  });
  p.start();
  return p;
}

/**
 * What a thief of `role`'s identity announces, heartbeat after heartbeat: a process of its own,
 * signed with a key it made, claiming `wire`, with the anchored key and the role signature copied
 * from a real heartbeat.
 */
function forger(role: string, real: Heartbeat, wire: WireWindow, id = `${role}-thief`): (seq: number) => Heartbeat {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const self = { ...info(id, role, wire), version: '0.2.0', key: KeyPair.generate().publicKey, roleKeys: real.roleKeys, signKey: publicKey.export({ format: 'jwk' }).x! };
  return (seq) => {
    const body = { ...self, seq };
    return { ...body, sig: sign(null, heartbeatSigned(role, body), privateKey).toString('base64url'), ...(real.roleSig ? { roleSig: real.roleSig } : {}) };
  };
}

function heartbeatsOf(bus: MemoryBus, role: string): Heartbeat[] {
  const beats: Heartbeat[] = [];
  bus.subscribe(`pier.process.heartbeat.${role}`, (m) => beats.push(decode(m.data) as Heartbeat));
  return beats;
}

test('F5: a wire-1 vault that does not prove its role (the anchored key and role signature copied) holds back no goodbye', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const vault = peersOf(bus, 'vault-1', 'vault', keysOf(['vault']));
  const edge = peersOf(bus, 'edge-1', 'edge', keysOf([]), CURRENT, { refused });
  const callback = peersOf(bus, 'callback-1', 'callback', keysOf(['callback']));
  t.teardown(() => [vault, edge].forEach((p) => p.stop()));
  const vaultBeats = heartbeatsOf(bus, 'vault');
  await until('a heartbeat of the real vault', () => vaultBeats.find((b) => b.roleSig !== undefined));
  const real = vaultBeats.find((b) => b.roleSig !== undefined)!;
  t.deepEqual(real.roleKeys, [anchors.vault![0].seal], 'the real vault announces its anchored key');

  bus.publish('pier.process.heartbeat.vault', encode(forger('vault', real, { speaks: 1, oldest: 1 })(1)));
  await until('the thief counted as a live vault (its own signature is good)', () => edge.alive('vault').length === 2 && callback.alive('vault').length === 2);
  const deaths: string[] = [];
  edge.onDeath((p) => deaths.push(p.id));
  const callbackBeats = heartbeatsOf(bus, 'callback');
  callback.stop();
  await until('the callback replica\'s goodbye acted on by the edge', () => deaths.length > 0, 5_000);
  t.deepEqual(deaths, ['callback-1']);
  t.true(callbackBeats.some((b) => b.leaving === true && b.roleSig !== undefined), 'the goodbye is proven too');
  t.deepEqual(edge.alive('callback'), []);
  t.deepEqual(refused, []);
});

test('a proven live process of an earlier wire format still holds back the goodbye (the rule stands where the claim is proven)', async (t) => {
  const bus = new MemoryBus();
  const older = peersOf(bus, 'vault-older', 'vault', keysOf(['vault']), { speaks: 1, oldest: 1 });
  const callback = peersOf(bus, 'callback-1', 'callback', keysOf(['callback']));
  t.teardown(() => older.stop());
  await until('the callback replica hears the older vault', () => callback.alive('vault').length === 1);
  const sent = heartbeatsOf(bus, 'callback');
  callback.stop();
  await bus.flush();
  t.false(sent.some((b) => b.leaving === true), 'a goodbye was sent while a proven wire-1 process lives');
  t.is(older.alive('callback').length, 1);
});

test('hostile: a claim of no common wire format is named a mismatch only when proven, or where nothing proves the role; an unproven one of an anchored role is said once and routed nothing', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const mismatches: string[] = [];
  const admin = peersOf(bus, 'admin-1', 'admin', keysOf(['admin']), CURRENT, { refused, mismatches });
  const vault = peersOf(bus, 'vault-1', 'vault', keysOf(['vault']));
  t.teardown(() => [admin, vault].forEach((p) => p.stop()));
  const vaultBeats = heartbeatsOf(bus, 'vault');
  await until('a heartbeat of the real vault', () => vaultBeats.length > 0);
  const far: WireWindow = { speaks: 9, oldest: 9 };
  // A thief of the vault's identity, twice over (its heartbeats repeat); a real vault two releases on; an edge two releases on.
  const thief = forger('vault', vaultBeats[0], far);
  bus.publish('pier.process.heartbeat.vault', encode(thief(1)));
  bus.publish('pier.process.heartbeat.vault', encode(thief(2)));
  const next = peersOf(bus, 'vault-far', 'vault', keysOf(['vault']), far);
  const edge = peersOf(bus, 'edge-far', 'edge', keysOf([]), far);
  t.teardown(() => [next, edge].forEach((p) => p.stop()));
  const named = () => admin.mismatched().map((p) => p.id);
  await until('both real far processes named', () => named().includes('edge-far') && named().includes('vault-far'));
  t.deepEqual(admin.mismatched().map((p) => p.id).sort(), ['edge-far', 'vault-far']);
  t.deepEqual(admin.alive('vault').map((p) => p.id), ['vault-1'], 'nothing routed to the thief nor to the far vault');
  await bus.flush();
  t.deepEqual(mismatches.sort(), ['edge edge-far', 'vault vault-far']);
  t.deepEqual(refused.filter((r) => /vault-thief claims wire formats 9-9/.test(r)).length, 1, refused.join('; '));
});

test('0.2.0 still believes a heartbeat of this release: its own signature covers the fields 0.2.0 signs, as 0.2.0 lays them out', async (t) => {
  const bus = new MemoryBus();
  const vault = peersOf(bus, 'vault-1', 'vault', keysOf(['vault']));
  t.teardown(() => vault.stop());
  const beats = heartbeatsOf(bus, 'vault');
  await until('a heartbeat of the vault', () => beats.length > 0);
  const b = beats[0];
  t.truthy(b.roleSig, 'proven with the role key');
  // lib/runtime/peers.ts at 0.2.0 (01531c9): `signed`.
  const signed02 = Buffer.from(JSON.stringify(['vault', b.id, b.busId, b.key, b.roleKeys, b.seq, b.signKey, b.wire!.speaks, b.wire!.oldest]));
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b.signKey }, format: 'jwk' });
  t.true(verify(null, signed02, key, Buffer.from(b.sig, 'base64url')));
});
