import { keyIdOf } from '../../lib/crypto/secret-box.js';
import { secretOfVersion, type VaultWriter } from './store.js';

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

/** Whether the live secret at `secret`, or one of its kept versions (any generation), is sealed under key `id`. */
function stillHeld(w: VaultWriter, secret: string, id: string): boolean {
  const live = w.secret(secret);
  if (live && keyIdOf(live.sealed) === id) return true;
  return w.versionsUnder(`${secret}${SEP}`).some((v) => keyIdOf(v.value.sealed) === id);
}
