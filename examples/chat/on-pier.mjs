// `npm run example:chat -- --pier <admin URL> [--user NAME]`: the example on a Pier that is already
// running (a cluster, another machine's npm start). Nothing of Pier is started or stopped: the two
// apps are installed for the user (made if new, else given a new token), run here, and uninstalled
// again at Ctrl-C (with their secrets), so the next run starts clean.
// The admin token comes as for the CLI: PIER_ADMIN_TOKEN, or admin.token in PIER_DATA_DIR. The
// edge's ports follow PIER_PUBLIC_PORT, PIER_LOCAL_PORT and PIER_UPLOAD_PORT (defaults 8080, 40010,
// 40030), on PIER_EDGE_HOST (default 127.0.0.1) for the app's calls to the local listener.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pier, ROOT, setupChat } from './setup.mjs';

export async function runOnPier({ adminUrl, user }) {
  if (!/^https?:\/\/[^\s/]+$/.test(adminUrl)) throw new Error(`--pier: "${adminUrl}" is not an admin URL like http://127.0.0.1:40090`);
  const adminEnv = { ...process.env, PIER_ADMIN_URL: adminUrl };
  // Fails early, naming what is wrong (no admin API there, a wrong token), before anything is installed.
  const status = await pier(['status'], adminEnv);
  if (status.missingRoles.length > 0) throw new Error(`Pier at ${adminUrl} runs no ${status.missingRoles.join(', ')} replica: start them first (pier status names what is missing)`);
  const ports = {
    public: Number(process.env.PIER_PUBLIC_PORT || 8080),
    local: Number(process.env.PIER_LOCAL_PORT || 40010),
    upload: Number(process.env.PIER_UPLOAD_PORT || 40030),
  };
  const base = join(ROOT, 'data', 'example-chat');
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, 'on-pier-'));
  let chat;
  try {
    chat = await setupChat({ adminEnv, ports, dir, user, edgeHost: process.env.PIER_EDGE_HOST || '127.0.0.1', existingUser: 'token' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    chat.stop();
    for (const app of ['chat', 'quotes']) await pier(['app', 'uninstall', '--user', user, app, '--purge'], adminEnv).catch((err) => process.stderr.write(`example: ${err.message}\n`));
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  process.stdout.write(
    [
      '',
      `Pier chat is running on the Pier at ${adminUrl}. Open ${chat.url}`,
      '  (*.localhost names resolve to this machine in Chrome, Chromium and Firefox)',
      '  type a message, or /quote to call the quotes provider; pick a file to upload it.',
      `  ${user}'s token: ${chat.userToken}`,
      `Ctrl-C stops the example and uninstalls its two apps for ${user} (Pier keeps running).`,
      '',
    ].join('\n'),
  );
}
