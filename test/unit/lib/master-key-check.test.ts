import test from 'ava';
import { randomBytes } from 'node:crypto';
import { PierError } from '../../../bus/errors.js';
import { ConfigError } from '../../../lib/config/config.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { checkImportKey, checkStoreKey } from '../../../lib/crypto/master-key-check.js';

test('a store or an import sealed under another master key is refused, naming what; the previous key and empty data pass', (t) => {
  const [a, b] = [randomBytes(32), randomBytes(32)];
  const sealedA = new Keyring(a).seal(Buffer.from('secret'), 'ctx');
  const sealed = [{ what: 'data key alice/chat/prod', value: sealedA }];
  t.throws(() => checkStoreKey(new Keyring(b), 'vault', sealed), { instanceOf: ConfigError, message: /^PIER_MASTER_KEY: the vault's data was sealed under another master key \(data key alice\/chat\/prod\)/ });
  t.notThrows(() => checkStoreKey(new Keyring(b, a), 'vault', sealed), 'during a rotation the old key is known');
  t.notThrows(() => checkStoreKey(new Keyring(a), 'vault', sealed));
  t.notThrows(() => checkStoreKey(new Keyring(b), 'vault', []), 'empty data: nothing to check');
  t.throws(() => checkImportKey(new Keyring(b), sealed), { instanceOf: PierError, message: /^state import: the file was sealed under another master key/ });
  t.false(new Keyring(a).knows(new Uint8Array(3)), 'too short to carry a key id');
});
