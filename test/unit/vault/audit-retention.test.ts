import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbVaultStore } from '../../../actors/vault/store-lmdb.js';

const entry = (at: number, name: string) => ({ at: new Date(at).toISOString(), user: 'alice', app: 'chat', op: 'RetrieveSecret', workspace: 'w', env: 'prod', name, outcome: 'ok' });

test('audit retention: entries past the age go, then the oldest past the count', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-audit-'));
  const store = LmdbVaultStore.open(dir, 'r');
  try {
    const day = 86_400_000;
    const now = 1_000 * day;
    await store.appendAudit([
      ...Array.from({ length: 30 }, (_, i) => entry(now - (100 - i) * day, `old-${i}`)),
      ...Array.from({ length: 20 }, (_, i) => entry(now - i * 1000, `new-${i}`)),
    ]);
    t.is(await store.pruneAudit(now - 90 * day, 15), 35, '30 too old, then the 5 oldest of the rest');
    const left = (await store.readAudit({ limit: 1000 })).entries;
    t.is(left.length, 15);
    t.true(left.every((e) => e.name!.startsWith('new-')));
    t.deepEqual(left.map((e) => e.name).slice(-1), ['new-14'], 'the newest are kept');
    t.is(await store.pruneAudit(now - 90 * day, 15), 0, 'nothing more to do');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
