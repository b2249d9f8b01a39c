import { ask, serve } from '../../../bus/verbs.js';
import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { PierError } from '../../../bus/errors.js';
import { registry } from '../../../bus/subjects.js';
import { AppSecrets } from '../../../lib/crypto/app-secrets.js';

// App secrets fetched once from the registry and kept (lib/crypto/app-secrets.ts).

function registryStub(bus: MemoryBus) {
  const asked: string[] = [];
  serve(bus, registry.appCredentials, ({ appKey }) => {
    asked.push(appKey);
    if (appKey === 'gone') throw new PierError('NOT_FOUND', 'no such app');
    return { appKey, appSecret: `secret-of-${appKey}`, user: 'alice', app: 'a' } as never;
  });
  return asked;
}

test('fetched once and kept; a failed fetch is not kept; forget and clear fetch again', async (t) => {
  const bus = new MemoryBus();
  const asked = registryStub(bus);
  const secrets = new AppSecrets((appKey) => ask(bus, registry.appCredentials, { appKey }).then((c) => c.appSecret));
  const [a, b] = await Promise.all([secrets.of('k1', () => 'k1'), secrets.of('k1', () => 'k1')]);
  t.is(a, 'secret-of-k1');
  t.is(b, a);
  t.deepEqual(asked, ['k1'], 'two concurrent askers, one fetch');
  await t.throwsAsync(secrets.of('x', () => 'gone'), { message: 'no such app' });
  await t.throwsAsync(secrets.of('x', () => 'gone'));
  t.deepEqual(asked, ['k1', 'gone', 'gone'], 'a failure is asked again, not kept');
  secrets.forget('k1');
  await secrets.of('k1', () => 'k1');
  secrets.clear();
  await secrets.of('k1', () => 'k1');
  t.deepEqual(asked.filter((k) => k === 'k1').length, 3);
  await bus.close();
});

test('what is kept is used even once the app is gone (a close after an uninstall is still signed); an unknown app is refused without asking', async (t) => {
  const bus = new MemoryBus();
  const asked = registryStub(bus);
  const secrets = new AppSecrets((appKey) => ask(bus, registry.appCredentials, { appKey }).then((c) => c.appSecret));
  await secrets.of('alice/a', () => 'k1');
  t.is(await secrets.of('alice/a', () => undefined), 'secret-of-k1');
  await t.throwsAsync(secrets.of('alice/b', () => undefined), { message: 'app alice/b is not installed' });
  t.deepEqual(asked, ['k1']);
  await bus.close();
});
