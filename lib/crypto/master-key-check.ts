import { PierError } from '../../bus/errors.js';
import { ConfigError } from '../config/config.js';
import type { Keyring } from './keyring.js';

/**
 * The master key check (docs/operations.md "How writes stay correct"; issue "no silent traps"). Everything Pier seals
 * carries the id of the master key that sealed it (`Keyring`), so a store whose sealed records are
 * all of a key this process does not have was made with another key. Starting on it, or importing
 * a file sealed so, would only show later, as every vault read failing: it is refused at once, in
 * one line naming the variable and the rotation procedure. Empty data passes (nothing to check).
 */
const ROTATION = 'to change keys, start with the old key as PIER_MASTER_KEY_PREVIOUS and the new one as PIER_MASTER_KEY, then run `pier vault rotate-master-key` (docs/vault.md)';

/** The first sealed value this keyring cannot open (with what it belongs to), or null. */
export function foreignSealed(keyring: Keyring, sealed: Iterable<{ what: string; value: Uint8Array }>): string | null {
  for (const s of sealed) if (!keyring.knows(s.value)) return s.what;
  return null;
}

/** At start: stops the process when its store was sealed under another master key. */
export function checkStoreKey(keyring: Keyring, store: string, sealed: Iterable<{ what: string; value: Uint8Array }>): void {
  const what = foreignSealed(keyring, sealed);
  if (what) throw new ConfigError(`PIER_MASTER_KEY: the ${store}'s data was sealed under another master key (${what}): start with the key it was sealed with; ${ROTATION}`);
}

/** At import: refuses a batch sealed under another master key than this Pier's, before writing any of it. */
export function checkImportKey(keyring: Keyring, sealed: Iterable<{ what: string; value: Uint8Array }>): void {
  const what = foreignSealed(keyring, sealed);
  if (what) throw new PierError('CONFLICT', `state import: the file was sealed under another master key than this Pier's PIER_MASTER_KEY (${what}): import it into a Pier started with that key (or with it as PIER_MASTER_KEY_PREVIOUS, then ${'`pier vault rotate-master-key`'})`);
}
