import type { ExecutionContext } from 'ava';
import { PierError } from '../../bus/errors.js';
import * as h from '../../actors/registry/handler.js';
import type { RegistryStore } from '../../actors/registry/store.js';
import type { Keyring } from '../../lib/crypto/keyring.js';
import { until } from './wait.js';

/** Registry handler dependencies over `store`, with a fixed clock and no one listening to changes. */
export function depsOf(store: RegistryStore, keyring: Keyring): h.RegistryDeps {
  return { store, keyring, now: () => new Date('2026-01-02T03:04:05Z'), publish: () => undefined };
}

/** A manifest with an upload section at `dest`, or none when `dest` is null. */
export function uploadManifest(name: string, dest: string | null): string {
  return `metadata: { name: ${name} }\n${dest === null ? '' : `upload: { fileType: ["*"], dest: "${dest}" }\n`}`;
}

/**
 * 10 installs for one user spread over two registry replicas at once, each app's dest inside the
 * previous one's (`/d`, `/d/x`, `/d/x/x`, ...: every pair nests): the check runs inside the write,
 * so exactly one is installed and every other is a dest conflict, whichever replica answered it.
 */
export async function concurrentNestedInstalls(t: ExecutionContext, a: h.RegistryDeps, b: h.RegistryDeps): Promise<void> {
  await h.userAdd(a, 'carol');
  await until('the second replica to know the user', async () => {
    await b.store.sync();
    return b.store.getUser('carol') !== undefined;
  });
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) =>
      h.appInstall(i % 2 ? a : b, { user: 'carol', manifest: uploadManifest(`app${i}`, `/d${'/x'.repeat(i)}`), providers: [], host: '127.0.0.1' }),
    ),
  );
  const won = results.filter((r) => r.status === 'fulfilled');
  t.is(won.length, 1, 'exactly one install wins');
  for (const r of results) {
    if (r.status === 'rejected') {
      t.true(r.reason instanceof PierError && r.reason.code === 'CONFLICT', String(r.reason));
      t.regex((r.reason as Error).message, /^upload\.dest "[^"]+" of app "app\d" encloses "[^"]+" of app "app\d": install with --shared-dest/);
    }
  }
  const listed = await until('both replicas to list the one app', async () => {
    await Promise.all([a.store.sync(), b.store.sync()]);
    const [x, y] = [h.appList(a, 'carol'), h.appList(b, 'carol')];
    return x.length === 1 && y.length === 1 ? x : undefined;
  });
  t.is(listed[0].app, (won[0] as PromiseFulfilledResult<{ app: string }>).value.app);
}
