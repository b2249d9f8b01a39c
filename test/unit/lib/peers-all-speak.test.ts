import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { decode } from '../../../bus/codec.js';
import type { Heartbeat, ProcessInfo, WireWindow } from '../../../bus/subjects.js';
import { KeyPair } from '../../../bus/seal.js';
import { BusKeys } from '../../../cli/bus-keys.js';
import { anchorsFromMasterKeys, roleSeed, RoleKeys, type AnchoredRole } from '../../../lib/crypto/bus-anchors.js';
import { Peers } from '../../../lib/runtime/peers.js';
import { until } from '../../helpers/wait.js';

// Peers.allSpeak: what the vault's writer of values under value keys waits for (docs/vault.md
// "Destroyed"): every live vault replica of wire format 3, as its proven heartbeats say.

const MASTER = randomBytes(32);
const anchors = anchorsFromMasterKeys([MASTER]);
const keysOf = (roles: AnchoredRole[]) => new BusKeys({ anchors, own: new Map(roles.map((r) => [r, [new RoleKeys(roleSeed(MASTER, r))]])), source: 'anchors file' });
const info = (id: string, role: string, wire: WireWindow): ProcessInfo => ({ id, busId: randomBytes(6).toString('hex'), roles: [role], pid: 1, host: 'h', startedAt: '', wire });
const NEW: WireWindow = { speaks: 3, oldest: 1 };
const OLD: WireWindow = { speaks: 2, oldest: 1 };

function peersOf(bus: MemoryBus, id: string, role: string, keys: BusKeys | undefined, wire: WireWindow) {
  const p = new Peers(bus, info(id, role, wire), { intervalMs: 50, deadAfterMs: 60_000, key: KeyPair.generate().publicKey, roleKeys: (r) => keys?.announced(r) ?? [], ...(keys ? { proof: keys } : {}) });
  p.start();
  return p;
}

test('every vault of format 3: yes; a proven vault of format 2 beside it: no, until it stops', async (t) => {
  const bus = new MemoryBus();
  const a = peersOf(bus, 'vault-a', 'vault', keysOf(['vault']), NEW);
  t.teardown(() => a.stop());
  t.false(a.allSpeak('vault', 3), 'not before every live process had two beats to be heard');
  await until('two heartbeat intervals heard', () => a.allSpeak('vault', 3));
  const old = peersOf(bus, 'vault-old', 'vault', keysOf(['vault']), OLD);
  await until('the proven format-2 vault heard', () => a.alive('vault').length === 2);
  t.false(a.allSpeak('vault', 3), 'a live replica of the release before holds the writer back');
  old.stop();
  await until('its goodbye heard', () => a.alive('vault').length === 1, 5_000);
  t.true(a.allSpeak('vault', 3));
});

test('hostile: a heartbeat that does not prove its role neither holds the writer back nor lets it on', async (t) => {
  const bus = new MemoryBus();
  const a = peersOf(bus, 'vault-a', 'vault', keysOf(['vault']), NEW);
  t.teardown(() => a.stop());
  const beats: Heartbeat[] = [];
  bus.subscribe('pier.process.heartbeat.vault', (m) => beats.push(decode(m.data) as Heartbeat));
  await until('two heartbeat intervals heard', () => a.allSpeak('vault', 3) && beats.length > 0);
  // A thief of the vault's bus identity, without its anchored key, announces a vault of format 2.
  const thief = peersOf(bus, 'vault-thief', 'vault', undefined, OLD);
  t.teardown(() => thief.stop());
  await until('the thief heard as a live vault', () => a.alive('vault').some((p) => p.id === 'vault-thief'));
  t.true(a.allSpeak('vault', 3), 'an unproven claim holds nothing back');
  // A replica of format 2 (proven) asks for format 3: never, whoever it hears.
  const old = peersOf(bus, 'vault-old', 'vault', keysOf(['vault']), OLD);
  t.teardown(() => old.stop());
  await until('the format-2 replica hears the other two', () => old.alive('vault').length === 3);
  t.false(old.allSpeak('vault', 3), 'a process never counts itself as speaking a format it does not');
  t.false(a.allSpeak('vault', 3), 'and its proven heartbeat holds the others back');
});
