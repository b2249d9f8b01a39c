#!/usr/bin/env node
// The example's browser test drives a real headless Chromium. As root, install Debian's package
// when it is missing; otherwise say so in one line: that one test is then skipped, with its reason.
// Never downloads a browser from anywhere else.
import { spawnSync } from 'node:child_process';

const found = () => ['chromium', 'chromium-browser'].some((n) => spawnSync('sh', ['-c', `command -v ${n}`]).status === 0);

if (!found()) {
  if (process.getuid?.() !== 0) {
    process.stderr.write('pier: chromium is missing (`sudo apt-get install -y chromium`): the browser test of the example will be skipped\n');
  } else {
    process.stderr.write('pier: chromium is missing; installing Debian package chromium (for the example\'s browser test)\n');
    const opts = { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
    if (spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], opts).status !== 0) {
      spawnSync('apt-get', ['update', '-qq'], opts);
      spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], opts);
    }
    if (!found()) process.stderr.write('pier: could not install chromium: the browser test of the example will be skipped\n');
  }
}
