import { anchorsFromMasterKeys, formatAnchors, formatHistoryKeys, formatSeeds, historySeed, roleSeed } from '../../../lib/crypto/bus-anchors.js';
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, normaliseSystemServer } from '../../../lib/config/config.js';

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

/** Loads a configuration from `env` in a scratch data dir; the error message when it is refused. */
function load(env: Record<string, string>, roles?: string): string | ReturnType<typeof loadConfig> {
  const dir = mkdtempSync(join(tmpdir(), 'pier-config-'));
  try {
    return loadConfig({ PIER_DATA_DIR: dir, ...env }, roles ? { roles } : {});
  } catch (err) {
    return (err as Error).message;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('secrets are kept only by the roles that use them: an edge generates no master key and no admin token file', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-config-'));
  try {
    const anchors = join(dir, 'anchors');
    writeFileSync(anchors, formatAnchors(anchorsFromMasterKeys([randomBytes(32)])));
    loadConfig({ PIER_DATA_DIR: dir, NATS_URL: 'nats://127.0.0.1:4222', PIER_BUS_ANCHORS: anchors }, { roles: 'edge' });
    t.false(existsSync(join(dir, 'master.key')));
    t.false(existsSync(join(dir, 'admin.token')));
    loadConfig({ PIER_DATA_DIR: dir, NATS_URL: 'nats://127.0.0.1:4222' }, { roles: 'vault,admin' });
    t.true(existsSync(join(dir, 'master.key')));
    t.true(existsSync(join(dir, 'admin.token')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('NATS identity: a credentials file (0600 only) or user and password, never both; TLS files must be readable', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-creds-'));
  try {
    const creds = join(dir, 'edge.nats.env');
    writeFileSync(creds, '# comment\nNATS_USER=pier-edge\nNATS_PASSWORD=secret-1\n', { mode: 0o600 });
    const ok = load({ NATS_CREDS: creds });
    t.deepEqual(typeof ok === 'string' ? ok : ok.natsAuth, { user: 'pier-edge', password: 'secret-1', tls: null, state: {} });
    t.is(load({ NATS_CREDS: creds, NATS_USER: 'x' }), 'NATS_CREDS: give either a credentials file or NATS_USER/NATS_PASSWORD, not both');
    t.is(load({ NATS_USER: 'x' }), 'NATS_USER and NATS_PASSWORD go together');
    t.is(load({ NATS_USER: 'a b', NATS_PASSWORD: 'p' }), 'NATS_USER: "a b" must be 1-64 characters of [A-Za-z0-9_-]');
    chmodSync(creds, 0o640);
    t.regex(String(load({ NATS_CREDS: creds })), /^NATS_CREDS: .*edge\.nats.env is readable by others \(mode 640\): chmod 600 it$/);
    t.regex(String(load({ NATS_TLS_CA: join(dir, 'missing.pem') })), /^NATS_TLS_CA: cannot read .*missing\.pem \(ENOENT\)$/);
    t.is(load({ NATS_TLS_CERT: creds }), 'NATS_TLS_CERT and NATS_TLS_KEY go together (a client certificate and its key)');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('TLS settings: off by default, listeners checked, half-set refused', (t) => {
  const plain = load({});
  t.is(typeof plain === 'string' ? plain : plain.tls, null);
  t.is(load({ PIER_TLS_SNI_DIR: '/tmp' }), 'PIER_TLS_CERT and PIER_TLS_KEY: required with PIER_TLS_SNI_DIR');
  t.is(load({ PIER_TLS_KEY: '/x.key' }), 'PIER_TLS_CERT and PIER_TLS_KEY go together');
  t.regex(String(load({ PIER_TLS_CERT: '/x.pem', PIER_TLS_KEY: '/x.key', PIER_TLS_LISTENERS: 'public,admin' })), /^PIER_TLS_LISTENERS: "admin" is not a listener with TLS/);
  // Only a process that listens reads the files: an actor-only process starts without them.
  const actor = load({ PIER_TLS_CERT: '/no/such.pem', PIER_TLS_KEY: '/no/such.key', NATS_URL: 'nats://127.0.0.1:4222' }, 'vault');
  t.deepEqual(typeof actor === 'string' ? actor : actor.tls?.listeners, ['public', 'upload']);
});

test('bus anchors: a process on NATS without the master key needs them, a callback replica its role key too; a bad or foreign file is refused by name', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-anchors-'));
  try {
    const master = randomBytes(32);
    const anchors = join(dir, 'anchors');
    writeFileSync(anchors, formatAnchors(anchorsFromMasterKeys([master])));
    const nats = { PIER_DATA_DIR: dir, NATS_URL: 'nats://127.0.0.1:4222' };
    const refused = (env: Record<string, string>, roles: string) => {
      try {
        loadConfig({ ...nats, ...env }, { roles });
        return 'started';
      } catch (err) {
        return (err as Error).message;
      }
    };
    t.regex(refused({}, 'edge'), /^PIER_BUS_ANCHORS: a process on NATS without PIER_MASTER_KEY needs the bus anchors/);
    t.regex(refused({ PIER_BUS_ANCHORS: anchors }, 'callback'), /^PIER_CALLBACK_KEY: a process running callback without PIER_MASTER_KEY needs the role's key/);
    t.regex(refused({ PIER_BUS_ANCHORS: anchors }, 'admin'), /^PIER_ADMIN_KEY: a process running admin without PIER_MASTER_KEY needs the role's key/);
    const adminKey = join(dir, 'admin.key');
    writeFileSync(adminKey, formatSeeds([roleSeed(master, 'admin')], 'admin'));
    const admin = loadConfig({ ...nats, PIER_BUS_ANCHORS: anchors, PIER_ADMIN_KEY: adminKey }, { roles: 'admin' });
    t.is(admin.busTrust.own.get('admin')?.[0].seal.publicKey, admin.busTrust.anchors.admin?.[0].seal);
    // The callback key of another master key: refused, not silently useless.
    const seeds = join(dir, 'callback.key');
    writeFileSync(seeds, formatSeeds([roleSeed(randomBytes(32), 'callback')], 'callback'));
    t.regex(refused({ PIER_BUS_ANCHORS: anchors, PIER_CALLBACK_KEY: seeds }, 'callback'), /^PIER_CALLBACK_KEY: this key is not the callback role's/);
    writeFileSync(seeds, formatSeeds([roleSeed(master, 'callback')], 'callback'));
    const callback = loadConfig({ ...nats, PIER_BUS_ANCHORS: anchors, PIER_CALLBACK_KEY: seeds }, { roles: 'callback' });
    t.is(callback.busTrust.own.get('callback')?.[0].seal.publicKey, callback.busTrust.anchors.callback?.[0].seal);
    t.is(callback.busTrust.source, 'anchors file');
    // The master key and an anchors file of another master key disagree: said at start.
    t.regex(refused({ PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_BUS_ANCHORS: anchors }, 'edge'), /^PIER_BUS_ANCHORS: its keys are not those of this master key/);
    t.is(loadConfig({ ...nats, PIER_MASTER_KEY: master.toString('hex'), PIER_BUS_ANCHORS: anchors }, { roles: 'edge' }).busTrust.source, 'master key');
    writeFileSync(anchors, 'vault=not-a-key\n');
    t.regex(refused({ PIER_BUS_ANCHORS: anchors }, 'edge'), /^PIER_BUS_ANCHORS, line 1: expected <role>=<seal key>.<sign key>/);
    t.regex(refused({ PIER_BUS_ANCHORS: join(dir, 'missing') }, 'edge'), /^PIER_BUS_ANCHORS: cannot read .*missing \(ENOENT\)/);
    // On the in-process bus nothing crosses a wire: no anchors needed.
    t.is(loadConfig({ PIER_DATA_DIR: dir }).busTrust.source, 'master key');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gateway history: on by default with its ceilings; the key from the master key, or an edge\'s PIER_HISTORY_KEY (the same key); a bad value or file stops the start by name', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-history-'));
  try {
    const master = randomBytes(32);
    const one = loadConfig({ PIER_DATA_DIR: dir, PIER_MASTER_KEY: master.toString('hex') });
    t.like(one.gateway.history, { on: true, ceilings: { messages: 100, bytes: 1024 * 1024, ttlMs: 300_000 }, messageBytes: 64 * 1024 });
    t.deepEqual(one.gateway.history.keys, [historySeed(master)]);
    const anchors = join(dir, 'anchors');
    writeFileSync(anchors, formatAnchors(anchorsFromMasterKeys([master])));
    const nats = { PIER_DATA_DIR: dir, NATS_URL: 'nats://127.0.0.1:4222', PIER_BUS_ANCHORS: anchors };
    t.is(loadConfig(nats, { roles: 'edge' }).gateway.history.keys, null, 'an edge on NATS with neither keeps no history');
    const keyFile = join(dir, 'history.key');
    writeFileSync(keyFile, formatHistoryKeys([historySeed(master)]));
    t.deepEqual(loadConfig({ ...nats, PIER_HISTORY_KEY: keyFile }, { roles: 'edge' }).gateway.history.keys, [historySeed(master)], 'the file holds the key the master key derives');
    t.false(loadConfig({ PIER_DATA_DIR: dir, PIER_WS_HISTORY: 'off' }).gateway.history.on);
    t.regex(t.throws(() => loadConfig({ PIER_DATA_DIR: dir, PIER_WS_HISTORY: 'maybe' }))!.message, /^PIER_WS_HISTORY: must be on or off/);
    t.regex(t.throws(() => loadConfig({ PIER_DATA_DIR: dir, PIER_WS_HISTORY_MESSAGES: '0' }))!.message, /^PIER_WS_HISTORY_MESSAGES: must be an integer from 1/);
    t.regex(t.throws(() => loadConfig({ ...nats, PIER_HISTORY_KEY: join(dir, 'absent') }, { roles: 'edge' }))!.message, /^PIER_HISTORY_KEY: cannot read/);
    writeFileSync(keyFile, 'not a key\n');
    t.regex(t.throws(() => loadConfig({ ...nats, PIER_HISTORY_KEY: keyFile }, { roles: 'edge' }))!.message, /^PIER_HISTORY_KEY: expected one or two 32-byte keys/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
