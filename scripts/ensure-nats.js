#!/usr/bin/env node
// The end-to-end tests start real nats-server processes. Find one; as root, install Debian's
// package when it is missing; otherwise say in one line what to do. Never downloads a binary.
import { spawnSync } from 'node:child_process';

const found = () => spawnSync('nats-server', ['--version'], { encoding: 'utf8', env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/usr/local/sbin` } }).status === 0;

if (!found()) {
  if (process.getuid?.() !== 0) {
    process.stderr.write('pier: the tests need nats-server: install it with `sudo apt-get install -y nats-server` and run npm test again\n');
    process.exit(1);
  }
  process.stderr.write('pier: nats-server is missing; installing Debian package nats-server\n');
  const opts = { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  if (spawnSync('apt-get', ['install', '-y', '-qq', 'nats-server'], opts).status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], opts);
    spawnSync('apt-get', ['install', '-y', '-qq', 'nats-server'], opts);
  }
  if (!found()) {
    process.stderr.write('pier: could not install nats-server; install it with `apt-get install -y nats-server`\n');
    process.exit(1);
  }
}
