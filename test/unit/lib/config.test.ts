import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, normaliseSystemServer } from '../../../lib/config.js';

test('PIER_SYSTEM_URL becomes the bare host:port apps get as OS_SYSTEM_SERVER', (t) => {
  t.is(normaliseSystemServer('127.0.0.1:40080'), '127.0.0.1:40080');
  t.is(normaliseSystemServer('http://system-server.user-system-alice:80/'), 'system-server.user-system-alice:80');
  t.is(normaliseSystemServer('HTTPS://pier.example.com'), 'pier.example.com');
  t.is(normaliseSystemServer(' [::1]:40080 '), '[::1]:40080');
});

test('PIER_SYSTEM_URL that is not host[:port] stops the start with a line naming it', (t) => {
  for (const bad of ['', 'http://', 'ftp://host:1', 'host:99999', 'host/path', 'user@host:1', 'http://host:1/api', 'a b']) {
    const err = t.throws(() => normaliseSystemServer(bad), { instanceOf: ConfigError }, bad);
    t.true(err!.message.startsWith('PIER_SYSTEM_URL: must be host:port'), bad);
  }
});

test('PIER_PROVIDER_NETWORKS: CIDRs are kept; anything else stops the start naming the entry', (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pier-config-'));
  try {
    t.deepEqual(loadConfig({ PIER_DATA_DIR: dataDir, PIER_PROVIDER_NETWORKS: '10.0.0.0/8, fd00::/8' }).provider.networks, ['10.0.0.0/8', 'fd00::/8']);
    t.deepEqual(loadConfig({ PIER_DATA_DIR: dataDir }).provider.networks, []);
    for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'example.com/8', '10.0.0.0/8,nope']) {
      const err = t.throws(() => loadConfig({ PIER_DATA_DIR: dataDir, PIER_PROVIDER_NETWORKS: bad }), { instanceOf: ConfigError }, bad);
      t.regex(err!.message, /^PIER_PROVIDER_NETWORKS: ".*" is not a CIDR/, bad);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
