import test from 'ava';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { freeLoopbackPort, NatsServer } from '../helpers/nats-server.js';
import { until } from '../helpers/wait.js';

// What a process on PIER_STATE=jetstream says at start of the server's acknowledgements
// (docs/operations.md "What an acknowledgement means"): one info line on a server that syncs before
// it acknowledges (sync_interval: always), one warning on one that syncs every 2 minutes; it starts either way.
const durabilityLines = (p: PierProcess) => p.logs.split('\n').filter((l) => l.includes('nats durability'));

async function pierOn(t: { teardown(fn: () => Promise<void> | void): void }, natsArgs: (dir: string) => string[]) {
  const dir = tempDir();
  const monitor = await freeLoopbackPort();
  const nats = await NatsServer.start([...natsArgs(dir), '-m', String(monitor)]);
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { NATS_URL: nats.url, PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1', PIER_NATS_MONITOR_URL: `http://127.0.0.1:${monitor}` }));
  t.teardown(async () => {
    await pier.stop('SIGKILL');
    await nats.stop();
    cleanup(dir);
  });
  return pier;
}

test('a server with sync_interval: always: said at info; on its default: one warning, and the process serves', async (t) => {
  // NatsServer.start gives a -js server the test configuration's sync_interval: always.
  const syncing = await pierOn(t, (dir) => ['-js', '-sd', join(dir, 'js')]);
  // The check runs beside the start: a server on its default is told about, so its line is the signal to wait for.
  const lazy = await pierOn(t, (dir) => {
    writeFileSync(join(dir, 'nats.conf'), `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }\n`);
    return ['-c', join(dir, 'nats.conf')];
  });
  const [line] = await until('the line about the server syncing every 2 minutes', () => (durabilityLines(lazy).length > 0 ? durabilityLines(lazy) : null));
  t.regex(JSON.parse(line!).msg, /^nats durability: nats-server does not sync before it acknowledges \(it syncs every 120 s\)/);
  t.is(JSON.parse(line!).level, 40, 'a warning, not an error');
  t.is((await fetch(`http://127.0.0.1:${lazy.ports!.public}/healthz`)).status, 200, 'it serves all the same');
  // The syncing one says so once, at info, and nothing else.
  const [ok] = await until('the syncing server judged', () => (durabilityLines(syncing).length > 0 ? durabilityLines(syncing) : null));
  t.is(JSON.parse(ok!).msg, 'nats durability: JetStream syncs before it acknowledges');
  t.is(JSON.parse(ok!).level, 30);
  t.is(durabilityLines(syncing).length, 1);
});

test('a role that waits at start for JetStream says what it waits for, every 10 s, until it gives up', async (t) => {
  // A server without JetStream: the vault's state cannot be opened (JetStream answers 503 all along).
  const dir = tempDir();
  const nats = await NatsServer.start([]);
  const proc = spawn(process.execPath, [BIN, 'start', '--roles', 'vault'], { env: pierEnv(join(dir, 'data'), { NATS_URL: nats.url, PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1', PIER_MASTER_KEY: '11'.repeat(32) }), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  t.teardown(async () => {
    proc.kill('SIGKILL');
    await nats.stop();
    cleanup(dir);
  });
  const line = await until('the first "still waiting" line', () => out.split('\n').find((l) => l.includes('starting: still waiting')), 25_000);
  const said = JSON.parse(line!);
  t.regex(said.msg, /^starting: still waiting for the vault role to open its state \(JetStream: .+\) after \d+ s$/);
  t.is(said.level, 40);
});
