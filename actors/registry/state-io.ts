import { PierError } from '../../bus/errors.js';
import { appId } from '../../bus/ids.js';
import { USER_NAME, type ProviderView, type StatePage, type StateRecord, type TokenView, type UserView } from '../../bus/subjects.js';
import type { AppRecord, RegistryStore } from './store.js';
import type { Keyring } from '../../lib/crypto/keyring.js';
import { checkImportKey } from '../../lib/crypto/master-key-check.js';

/** Every record of the registry, in a stable order: users, tokens, apps (with their sealed secrets), providers. */
export function registryRecords(store: RegistryStore): StateRecord[] {
  return [
    ...store.listUsers().map((value): StateRecord => ({ kind: 'user', value })),
    ...store.listTokens().map((value): StateRecord => ({ kind: 'token', value })),
    ...store.listApps().map((value): StateRecord => ({ kind: 'app', value: value as unknown as Record<string, unknown> })),
    ...store.listProviders().map((value): StateRecord => ({ kind: 'provider', value })),
  ];
}

export async function registryExportPage(store: RegistryStore, offset: number, limit: number): Promise<StatePage> {
  await store.sync();
  const all = registryRecords(store);
  return { records: all.slice(offset, offset + limit), done: offset + limit >= all.length };
}

/** Writes a batch of exported records as one registry write (one revision); other kinds are the vault's. */
export async function registryImportBatch(store: RegistryStore, records: StateRecord[], keyring: Keyring): Promise<{ imported: number; event: Awaited<ReturnType<RegistryStore['write']>>['event'] }> {
  // Sealed under another master key: refused before anything of the batch is written.
  checkImportKey(keyring, records.flatMap((r) => (r.kind === 'app' && (r.value as unknown as AppRecord).secretSealed instanceof Uint8Array ? [{ what: `app ${String(r.value.id)}`, value: (r.value as unknown as AppRecord).secretSealed }] : [])));
  let imported = 0;
  const { event } = await store.write((w) => {
    for (const r of records) {
      if (r.kind === 'user') {
        const u = r.value as UserView;
        if (!USER_NAME.test(u.name)) throw new PierError('BAD_REQUEST', `user: ${JSON.stringify(u.name)} is not a user name`);
        w.putUser(u);
      } else if (r.kind === 'token') w.putToken(r.value as TokenView);
      else if (r.kind === 'app') {
        const a = r.value as unknown as AppRecord;
        if (a.id !== appId(a.user, a.name) || !(a.secretSealed instanceof Uint8Array) || typeof a.appKey !== 'string') throw new PierError('BAD_REQUEST', `app ${JSON.stringify(a.id)}: not an exported app record`);
        w.putApp(a);
      } else if (r.kind === 'provider') w.putProvider(r.value as ProviderView);
      else continue;
      imported++;
    }
  });
  return { imported, event };
}
