#!/usr/bin/env node
// Makes a checkout runnable: installs dependencies when node_modules is missing or older than the
// lock file, then compiles the TypeScript (Pier and the SDK) (incremental, so a no-change build takes a moment).
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    process.stderr.write(`pier: \`${cmd} ${args.join(' ')}\` failed\n`);
    process.exit(r.status ?? 1);
  }
};

const marker = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');
if (!existsSync(marker) || (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs)) {
  run('npm', [existsSync(lock) ? 'ci' : 'install', '--no-audit', '--no-fund']);
}
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
// The SDK is its own package (sdk/, with the browser's types), built first into sdk/dist: Pier's
// tests and the example import it as @pier/sdk.
run(process.execPath, [tsc, '-p', join(root, 'sdk', 'tsconfig.json')]);
run(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')]);
// The console's JSDoc types against the admin API's (no output: a type error stops the start or the tests).
run(process.execPath, [tsc, '-p', join(root, 'console', 'tsconfig.json')]);
