import test from 'ava';
import { execFile } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cleanup, ROOT, tempDir } from '../helpers/pier.js';

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

// The SDK leaves the repository (issue: operator and app-developer experience): `npm pack` of
// sdk/ gives a tarball that an app in a folder of its own installs and imports, both halves, with
// their types.
test('npm pack of sdk/: an app outside the repository installs the tarball and imports @pier/sdk/server and /browser', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  // (The build made dist/ already: packing without scripts packs exactly what the tests run.)
  await run(NPM, ['pack', join(ROOT, 'sdk'), '--ignore-scripts', '--pack-destination', dir], { timeout: 60_000 });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  t.truthy(tarball, 'a tarball');
  const listing = (await run('tar', ['tzf', join(dir, tarball!)])).stdout.split('\n');
  t.true(listing.includes('package/dist/server/index.d.ts'), 'types are in it');
  t.false(listing.some((f) => f.includes('.tsbuildinfo') || f.startsWith('package/src/')), 'nothing but the build and the README');
  const app = join(dir, 'app');
  await run('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'an-app', version: '1.0.0', type: 'module', private: true }));
  await run(NPM, ['install', join(dir, tarball!), '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, timeout: 120_000 });
  writeFileSync(join(app, 'main.js'), "import * as server from '@pier/sdk/server';\nimport * as browser from '@pier/sdk/browser';\nimport * as errors from '@pier/sdk/errors';\nconsole.log(JSON.stringify({ server: Object.keys(server).sort(), browser: Object.keys(browser).sort(), errors: Object.keys(errors).length }));\n");
  const out = JSON.parse((await run(process.execPath, ['main.js'], { cwd: app })).stdout);
  for (const name of ['PierApp', 'CallbackReceiver']) t.true(out.server.includes(name), `server exports ${name}: ${out.server}`);
  for (const name of ['connectGateway', 'upload']) t.true(out.browser.includes(name), `browser exports ${name}: ${out.browser}`);
  t.true(out.errors > 0);
});
