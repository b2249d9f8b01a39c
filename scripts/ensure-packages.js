#!/usr/bin/env node
// The end-to-end tests start real nats-server processes, and the chaos run puts Debian's haproxy
// in front of the edges. Find each; as root, install Debian's package when it is missing;
// otherwise say in one line what to do. Never downloads a binary.
import { spawnSync } from 'node:child_process';

// `node scripts/ensure-packages.js [package...]`: the named ones (default: what npm test needs).
// The benchmark asks for nginx too: the reverse proxy a user would put in front of a provider.
const KNOWN = {
  'nats-server': { bin: 'nats-server', probe: ['--version'], pkg: 'nats-server' },
  haproxy: { bin: 'haproxy', probe: ['-v'], pkg: 'haproxy' },
  nginx: { bin: 'nginx', probe: ['-v'], pkg: 'nginx' },
};
const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in KNOWN));
if (unknown.length > 0) {
  process.stderr.write(`ensure-packages: unknown package ${unknown.join(', ')} (have: ${Object.keys(KNOWN).join(', ')})\n`);
  process.exit(2);
}
const PACKAGES = (wanted.length > 0 ? wanted : ['nats-server', 'haproxy']).map((w) => KNOWN[w]);
const env = { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/usr/local/sbin` };
const found = (p) => spawnSync(p.bin, p.probe, { encoding: 'utf8', env }).status === 0;

const missing = PACKAGES.filter((p) => !found(p));
if (missing.length > 0) {
  const names = missing.map((p) => p.pkg);
  if (process.getuid?.() !== 0) {
    process.stderr.write(`pier: the tests need ${names.join(' and ')}: install with \`sudo apt-get install -y ${names.join(' ')}\` and run npm test again\n`);
    process.exit(1);
  }
  process.stderr.write(`pier: ${names.join(' and ')} missing; installing Debian's package(s)\n`);
  const opts = { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  if (spawnSync('apt-get', ['install', '-y', '-qq', ...names], opts).status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], opts);
    spawnSync('apt-get', ['install', '-y', '-qq', ...names], opts);
  }
  const still = missing.filter((p) => !found(p));
  if (still.length > 0) {
    process.stderr.write(`pier: could not install ${still.map((p) => p.pkg).join(' and ')}; install with \`apt-get install -y ${still.map((p) => p.pkg).join(' ')}\`\n`);
    process.exit(1);
  }
}
