import type { TestFn } from 'ava';
import { PierError } from '../../bus/errors.js';
import type { RegistryStore } from '../../actors/registry/store.js';
import { until } from '../helpers/wait.js';

/** Two replicas of the registry's store on one backend, and a way to open a third later. */
export interface RegistryPair {
  a: RegistryStore;
  b: RegistryStore;
  another(): Promise<RegistryStore>;
  close(): Promise<void>;
  /**
   * What separates a replica's answer from another replica's read beyond sync(): nothing on
   * JetStream; on LMDB, one timer turn (lmdb-js renews its read snapshot then: the other
   * "replica" here is another handle in this process, as another process would be).
   */
  turn?: () => Promise<void>;
}

const addUser = (s: RegistryStore, name: string) =>
  s.write((w) => {
    if (s.getUser(name)) throw new PierError('CONFLICT', `user "${name}" already exists`);
    w.putUser({ name, createdAt: 't' });
    w.putToken({ digest: `d-${name}-${Math.random()}`, user: name });
    return name;
  });

/**
 * What every registry store must hold (docs/operations.md "How writes stay correct"): a write is one event with the next
 * revision; a replica reads its own writes at once, the other soon, at the same revision; contended
 * creates give exactly one winner; a replica opened later has the same state.
 */
export function registryStoreSuite(test: TestFn, open: () => Promise<RegistryPair>): void {
  let pair: RegistryPair;
  test.before(async () => {
    pair = await open();
  });
  test.after.always(async () => {
    await pair?.close();
  });

  test.serial('a write is the next revision, read back at once, and seen by the other replica at the same revision', async (t) => {
    const before = pair.a.revision();
    const { event } = await addUser(pair.a, 'alice').then(() => pair.a.write((w) => w.putUser({ name: 'alice2', createdAt: 't' })));
    t.is(event?.revision, before + 2);
    t.truthy(pair.a.getUser('alice2'));
    await until('the other replica at the same revision', () => pair.b.revision() === pair.a.revision());
    t.truthy(pair.b.getUser('alice'));
    t.deepEqual((await pair.a.write(() => 'nothing changed')).event, null, 'no change, no revision');
  });

  test.serial('a write answered by one replica is read by the other right after its sync(), each time', async (t) => {
    for (let i = 0; i < 10; i++) {
      await pair.a.write((w) => w.putUser({ name: `ryw${i}`, createdAt: 't' }));
      await pair.b.sync();
      await pair.turn?.();
      t.truthy(pair.b.getUser(`ryw${i}`), `write ${i}`);
    }
  });

  test.serial('a provider put and then deleted is gone on both replicas, and from a snapshot', async (t) => {
    const provider = { name: 'provider-x-alice', user: 'alice', app: 'x', dataType: 'd', group: 'g', version: 'v1', endpoint: '127.0.0.1:1', ops: {}, state: 'active' } as never;
    await pair.a.write((w) => w.putProvider(provider));
    await until('the other replica to see the provider', () => pair.b.getProvider('provider-x-alice') !== undefined);
    const { event } = await pair.b.write((w) => w.deleteProvider('provider-x-alice'));
    t.deepEqual(event?.changes, [{ kind: 'provider', op: 'delete', key: 'provider-x-alice' }]);
    await until('both replicas to forget it', () => pair.a.getProvider('provider-x-alice') === undefined && pair.b.getProvider('provider-x-alice') === undefined);
    t.false(pair.a.snapshot().providers.some((p) => p.name === 'provider-x-alice'));
  });

  test.serial('10 concurrent creates of one user over two replicas: exactly one winner, one revision', async (t) => {
    const before = pair.a.revision();
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => addUser(i % 2 ? pair.a : pair.b, 'bob')));
    t.is(results.filter((r) => r.status === 'fulfilled').length, 1);
    t.true(results.every((r) => r.status === 'fulfilled' || (r.reason as PierError).code === 'CONFLICT'));
    await until('both replicas to agree', () => pair.a.revision() === before + 1 && pair.b.revision() === before + 1);
    t.is(pair.b.listTokens('bob').length, 1, 'one token: the loser wrote nothing');
  });

  test.serial('writes from both replicas interleave into one history; a replica opened later has the same state', async (t) => {
    await Promise.all(Array.from({ length: 10 }, (_, i) => addUser(i % 2 ? pair.a : pair.b, `u${i}`)));
    await until('both replicas at one revision', () => pair.a.revision() === pair.b.revision());
    t.deepEqual(pair.a.snapshot(), pair.b.snapshot());
    const c = await pair.another();
    await until('the new replica to catch up', () => c.revision() === pair.a.revision());
    t.deepEqual(c.snapshot(), pair.a.snapshot());
    await c.close();
  });
}
