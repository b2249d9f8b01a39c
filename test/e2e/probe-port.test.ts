import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';

// PIER_PROBE_PORT: an actor-only process (no listener of its own) answers /healthz, /readyz and
// /metrics for its orchestrator and its operator.
test('a vault-only process answers probes and metrics on PIER_PROBE_PORT; readyz follows the registry', async (t) => {
  const dir = tempDir();
  const nats = await NatsServer.start();
  const shared = { NATS_URL: nats.url, PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250', PIER_REGISTRY_HEARTBEAT_MS: '100', PIER_REGISTRY_MAX_STALENESS_MS: '1000' };
  const registry = await PierProcess.start(pierEnv(join(dir, 'registry'), shared), ['--roles', 'registry']);
  const vault = await PierProcess.start(pierEnv(join(dir, 'vault'), { ...shared, PIER_PROBE_PORT: '0' }), ['--roles', 'vault']);
  t.teardown(async () => {
    await vault.stop('SIGKILL');
    await registry.stop('SIGKILL');
    await nats.stop();
    cleanup(dir);
  });
  const port = Number(/"probePort":(\d+)/.exec(vault.logs)?.[1]);
  t.true(port > 0, 'the ready line names the probe port');
  const probe = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
  t.is((await probe('/healthz')).status, 200);
  await until('the vault process to be ready', async () => (await probe('/readyz')).status === 200);
  const metrics = await (await probe('/metrics')).text();
  t.regex(metrics, /^pier_bus_refusals_total|^# HELP pier_/m);
  t.is((await probe('/nothing')).status, 404);
  t.is((await fetch(`http://127.0.0.1:${port}/healthz`, { method: 'POST' })).status, 405);
  await registry.stop('SIGKILL');
  await until('readyz to say the registry is gone', async () => (await probe('/readyz')).status === 503);
  t.regex(((await (await probe('/readyz')).json()) as { message: string }).message, /registry not reachable/);
});
