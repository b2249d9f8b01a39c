import test from 'ava';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, cleanup, failedStart, pierEnv, tempDir } from '../helpers/pier.js';
import { ROLES } from '../../lib/config/config.js';
import { NatsServer, SYNC_ALWAYS } from '../helpers/nats-server.js';

function start(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BIN, 'start', ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', (code) => resolve({ code, stderr }));
  });
}

test('a port already taken: one clear line, exit 1', async (t) => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const dir = tempDir();
  t.teardown(() => {
    server.close();
    cleanup(dir);
  });
  const r = await start(pierEnv(dir, { PIER_ADMIN_PORT: String(port) }));
  t.is(r.code, 1);
  t.is(r.stderr, `pier: admin listener: cannot listen on 127.0.0.1:${port} (port taken or address not available)\n`);
});

test('a data dir that cannot be written: one clear line, exit 1', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const file = join(dir, 'not-a-dir');
  writeFileSync(file, 'x');
  const r = await start(pierEnv(join(file, 'data')));
  t.is(r.code, 1);
  t.regex(r.stderr, /^pier: PIER_DATA_DIR: .*not-a-dir\/data is not a writable directory \(ENOTDIR\)\n$/);
});

test('bad values are refused before anything starts', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const cases: Array<[Record<string, string>, string[], string]> = [
    [{}, ['--roles', 'edge,teleporter'], `pier: --roles: unknown role "teleporter" (roles: ${ROLES.join(', ')})\n`],
    [{}, ['--roles', 'edge'], 'pier: --roles edge: running a subset of roles needs NATS_URL (the in-process bus only joins roles inside one process)\n'],
    [{ PIER_SYSTEM_PORT: '70000' }, [], 'pier: PIER_SYSTEM_PORT: must be an integer from 0 to 65535, got "70000"\n'],
    [{ PIER_PUBLIC_PORT: 'eighty' }, [], 'pier: PIER_PUBLIC_PORT: must be an integer from 0 to 65535, got "eighty"\n'],
    [{ PIER_MASTER_KEY: 'short' }, [], 'pier: PIER_MASTER_KEY: must be 32 bytes, as 64 hex digits or base64\n'],
    [{ NATS_URL: 'localhost:4222' }, [], 'pier: NATS_URL: must look like nats://host:4222, got "localhost:4222"\n'],
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, [], 'pier: OTEL_TRACES_SAMPLER: one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "sometimes"\n'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, [], 'pier: OTEL_EXPORTER_OTLP_ENDPOINT: must be http:// or https:// (OTLP/HTTP), got collector:\n'],
  ];
  for (const [extra, args, expected] of cases) {
    const r = await start(pierEnv(dir, extra), args);
    t.is(r.code, 1, expected);
    t.is(r.stderr, expected);
  }
});

test('NATS that cannot be reached: one clear line, exit 1', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const r = await start(pierEnv(dir, { NATS_URL: 'nats://127.0.0.1:9' }));
  t.is(r.code, 1);
  t.regex(r.stderr, /^pier: cannot connect to NATS at nats:\/\/127\.0\.0\.1:9: .*\n$/);
});

test('PIER_STATE=jetstream on one nats-server with three copies asked: one line naming PIER_JS_REPLICAS=1, not NATS words', async (t) => {
  const dir = tempDir();
  const nats = await NatsServer.start(['-js', '-sd', join(dir, 'js')]);
  t.teardown(async () => {
    await nats.stop();
    cleanup(dir);
  });
  const r = await start(pierEnv(join(dir, 'data'), { NATS_URL: nats.url, PIER_STATE: 'jetstream' }));
  t.is(r.code, 1);
  t.is(r.stderr, 'pier: PIER_JS_REPLICAS=3: this NATS server is not a cluster (it keeps one copy): set PIER_JS_REPLICAS=1, or run a JetStream cluster of 3 nodes\n');
});

test('a JetStream store smaller than a stream\'s reservation: one line naming the stream, what it asks, the setting that sizes it and max_file_store (#52)', async (t) => {
  const dir = tempDir();
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))}, max_file_store: 64MB, ${SYNC_ALWAYS} }\n`);
  const nats = await NatsServer.start(['-c', conf]);
  t.teardown(async () => {
    await nats.stop();
    cleanup(dir);
  });
  const shape = { NATS_URL: nats.url, PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' };
  // The gateway history's stream reserves 1 GiB by default (the vault's audit is made small enough to fit).
  const history = await failedStart(pierEnv(join(dir, 'one'), { ...shape, PIER_AUDIT_MAX_ENTRIES: '1000' }));
  t.is(history.code, 1);
  t.is(
    history.stderr,
    "pier: JetStream stream PIER_WS_HISTORY: nats-server cannot reserve the 1 GiB (1073741824 bytes, from PIER_WS_HISTORY_STORE_BYTES) it asks for: lower PIER_WS_HISTORY_STORE_BYTES, or raise nats-server's jetstream { max_file_store } (an account's jetstream { max_file }, where set, bounds it too)\n",
  );
  // With the defaults the vault's audit (PIER_AUDIT_MAX_ENTRIES × 512 bytes) does not fit either: its
  // stream, made small above, is refused the larger size it asks for now.
  const audit = await failedStart(pierEnv(join(dir, 'two'), shape));
  t.is(audit.code, 1);
  t.is(
    audit.stderr,
    "pier: JetStream stream PIER_VAULT_AUDIT: nats-server cannot reserve the 488.3 MiB (512000000 bytes, from PIER_AUDIT_MAX_ENTRIES) it asks for: lower PIER_AUDIT_MAX_ENTRIES, or raise nats-server's jetstream { max_file_store } (an account's jetstream { max_file }, where set, bounds it too)\n",
  );
});
