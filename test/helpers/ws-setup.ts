import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from './pier.js';
import { WsApp, wsManifest, type AppBehaviour } from './ws-app.js';

export interface GatewayFixture {
  pier: PierProcess;
  app: WsApp;
  /** alice's user token; her app "chat" calls back to `app`. */
  token: string;
  teardown(): Promise<void>;
}

/** One `pier start` with user alice and her app "chat" whose callbacks go to a real HTTP app. */
export async function gatewayFixture(env: Record<string, string> = {}, behaviour: AppBehaviour = {}): Promise<GatewayFixture> {
  const dir = tempDir();
  const app = await WsApp.start(behaviour);
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), env));
  const cliEnv = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], cliEnv)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], cliEnv);
  return {
    pier,
    app,
    token,
    async teardown() {
      await pier.stop('SIGKILL');
      await app.stop();
      cleanup(dir);
    },
  };
}
