import { keyIdOf } from '../../lib/crypto/secret-box.js';
import { secretOfVersion, type VaultStore, type VaultWriter } from './store.js';

const SEP = '\u0000';

/**
 * `fn` run on a writer that erases, at its end, every value key (docs/vault.md "Destroyed") whose
 * last value left the secret in this write: a value is sealed under its key once, and then moves
 * (an update keeps it as a version, a delete as the deleted secret's last, an undelete brings it
 * back), so a key is erased when no record of its secret holds a box naming it any more, never
 * while one does. Every store's write goes through this, whatever called it: a destroy, a trim, a
 * purge, the retention sweep, an import overwriting a record.
 */
export function erasingUnusedValueKeys<T>(fn: (w: VaultWriter) => T): (w: VaultWriter) => T {
  return (w) => {
    /** Value keys of records this write removed or replaced, with the secret they belonged to. */
    const left = new Map<string, string>();
    const leaving = (secret: string, sealed: Uint8Array | undefined) => {
      const id = sealed && keyIdOf(sealed);
      if (id !== undefined) left.set(id, secret);
    };
    const tracking: VaultWriter = {
      ...w,
      putSecret: (key, record) => (leaving(key, w.secret(key)?.sealed), w.putSecret(key, record)),
      removeSecret: (key) => (leaving(key, w.secret(key)?.sealed), w.removeSecret(key)),
      putVersion: (vkey, record) => (leaving(secretOfVersion(vkey), w.version(vkey)?.sealed), w.putVersion(vkey, record)),
      removeVersion: (vkey) => (leaving(secretOfVersion(vkey), w.version(vkey)?.sealed), w.removeVersion(vkey)),
    };
    const result = fn(tracking);
    for (const [id, secret] of left) {
      if (!stillHeld(w, secret, id) && w.valueKey(id)) w.removeValueKey(id);
    }
    return result;
  };
}

/** A value key committed by a write attempt that did not land, and the secret its value was sealed for. */
export interface StrayValueKey {
  id: string;
  secret: string | undefined;
}

/** The secret whose record, among a write's changes, holds a box sealed under key `id`. */
export function secretSealedUnder(ops: ReadonlyArray<{ key: string; value: unknown }>, id: string): string | undefined {
  for (const op of ops) {
    const sealed = (op.value as { sealed?: unknown } | undefined)?.sealed;
    if (sealed instanceof Uint8Array && keyIdOf(sealed) === id) return op.key.split(SEP).length > 4 ? secretOfVersion(op.key) : op.key;
  }
  return undefined;
}

/**
 * Erases value keys written by attempts that did not land (store-jetstream-write.ts publish), unless a
 * record that did land holds a box naming one. A key whose secret is unknown is left to the sweep
 * (`strayValueKeys`), which looks at every record.
 */
export async function dropStrayValueKeys(store: Pick<VaultStore, 'write'>, stray: readonly StrayValueKey[]): Promise<void> {
  await store.write((w) => {
    for (const { id, secret } of stray) if (secret !== undefined && w.valueKey(id) && !stillHeld(w, secret, id)) w.removeValueKey(id);
  });
}

/** How long a value key no record names is left alone: a write puts a value's key before its record. */
export const STRAY_MARGIN_MS = 10 * 60_000;

/**
 * Value keys no record holds a box naming, written more than `STRAY_MARGIN_MS` before `now` (or
 * whenever, when the store does not say): what a write cut short between its commits (JetStream)
 * leaves, the key of a value whose record never landed, or of one destroyed before the key's own
 * erasure was committed. The sweep erases them (index.ts), a batch per write; the margin keeps a
 * write still in flight out of it.
 */
export function strayValueKeys(store: Pick<VaultStore, 'everything'>, now: number, limit: number): string[] {
  const { secrets, versions, valueKeys } = store.everything();
  const held = new Set([...secrets, ...versions].flatMap((r) => keyIdOf(r.value.sealed) ?? []));
  return valueKeys.filter((k) => !held.has(k.id) && (k.value.at ?? 0) < now - STRAY_MARGIN_MS).slice(0, limit).map((k) => k.id);
}

/** Whether the live secret at `secret`, or one of its kept versions (any generation), is sealed under key `id`. */
function stillHeld(w: VaultWriter, secret: string, id: string): boolean {
  const live = w.secret(secret);
  if (live && keyIdOf(live.sealed) === id) return true;
  return w.versionsUnder(`${secret}${SEP}`).some((v) => keyIdOf(v.value.sealed) === id);
}
