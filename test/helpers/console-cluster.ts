import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { NatsServer } from './nats-server.js';
import { cleanup, pierEnv, PierProcess, tempDir } from './pier.js';

/**
 * Pier as several processes on one NATS, for the operator console's browser test: `main` runs every
 * role (the console under test is its admin listener), `spare` only the admin role, with console
 * sessions of `spareSessionMs` (an expiring session is watched on it, and it is the process killed
 * to see it drop out of the processes view). Heartbeats every 250 ms, chart samples every 500 ms.
 */
export interface ConsoleCluster {
  dir: string;
  nats: NatsServer;
  main: PierProcess;
  spare: PierProcess;
  adminToken: string;
  /** Stops every process (SIGKILL: nothing to keep), NATS, and removes the data dirs. */
  stop(): Promise<void>;
}

export async function startConsoleCluster(o: { spareSessionMs: number; env?: Record<string, string> }): Promise<ConsoleCluster> {
  const dir = tempDir('pier-console-');
  const adminToken = randomBytes(24).toString('base64url');
  const procs: PierProcess[] = [];
  let nats: NatsServer | undefined;
  const stop = async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await nats?.stop();
    cleanup(dir);
  };
  try {
    nats = await NatsServer.start();
    const shared = {
      NATS_URL: nats.url,
      PIER_ADMIN_TOKEN: adminToken,
      PIER_MASTER_KEY: randomBytes(32).toString('hex'),
      PIER_REGISTRY_HEARTBEAT_MS: '250',
      PIER_CONSOLE_SAMPLE_MS: '500',
      ...o.env,
    };
    const main = await PierProcess.start(pierEnv(join(dir, 'main'), shared), ['--roles', 'all']);
    procs.push(main);
    const spare = await PierProcess.start(pierEnv(join(dir, 'spare'), { ...shared, PIER_CONSOLE_SESSION_MS: String(o.spareSessionMs), PIER_SYSTEM_URL: `127.0.0.1:${main.ports!.system}` }), ['--roles', 'admin']);
    procs.push(spare);
    return { dir, nats, main, spare, adminToken, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
