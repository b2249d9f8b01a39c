#!/usr/bin/env node
// The end-to-end tests start real nats-server processes, and the chaos run puts Debian's haproxy
// in front of the edges. Find each; as root, install Debian's package when it is missing (or, for
// nats-server, too old); otherwise say in one line what to do. Never downloads a binary.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';

// `node scripts/ensure-packages.js [package...]`: the named ones (default: what npm test needs).
// The benchmark asks for nginx too: the reverse proxy a user would put in front of a provider.
// nats-server must sync before it acknowledges (`sync_interval`, 2.10 on; docs/operations.md):
// Debian 12 ships 2.9.10, so it comes from Debian 13 (trixie), pinned to that one package.
const KNOWN = {
  'nats-server': { bin: 'nats-server', probe: ['--version'], pkg: 'nats-server', atLeast: [2, 10], suite: 'trixie' },
  haproxy: { bin: 'haproxy', probe: ['-v'], pkg: 'haproxy' },
  nginx: { bin: 'nginx', probe: ['-v'], pkg: 'nginx' },
  'python3-pyfuse3': { bin: '/usr/bin/python3', probe: ['-c', 'import pyfuse3'], pkg: 'python3-pyfuse3', rootOnly: true }, // powercut/lossyfs.py: FUSE mounts need root, so do its tests
};
const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in KNOWN));
if (unknown.length > 0) {
  process.stderr.write(`ensure-packages: unknown package ${unknown.join(', ')} (have: ${Object.keys(KNOWN).join(', ')})\n`);
  process.exit(2);
}
const PACKAGES = (wanted.length > 0 ? wanted : ['nats-server', 'haproxy', 'python3-pyfuse3']).map((w) => KNOWN[w]).filter((p) => !p.rootOnly || process.getuid?.() === 0);
const env = { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/usr/local/sbin` };

/** Whether the package's program runs, and is recent enough when a version is asked for. */
function found(p) {
  const r = spawnSync(p.bin, p.probe, { encoding: 'utf8', env });
  if (r.status !== 0) return false;
  if (!p.atLeast) return true;
  const m = /v?(\d+)\.(\d+)\.(\d+)/.exec(`${r.stdout}${r.stderr}`);
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > p.atLeast[0] || (major === p.atLeast[0] && minor >= p.atLeast[1]);
}

/**
 * The archive this machine already takes Debian's release from (its apt sources name it: a mirror,
 * a proxy or Debian's own host), never one named here; null when the sources name none.
 */
function debianArchive() {
  const dir = '/etc/apt/sources.list.d';
  const files = ['/etc/apt/sources.list', ...(existsSync(dir) ? readdirSync(dir).map((f) => `${dir}/${f}`) : [])].filter((f) => /\.(list|sources)$/.test(f) && existsSync(f));
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    // deb822 (.sources): a stanza whose URIs end in /debian; one-line (.list): `deb <uri> <suite> main`.
    for (const stanza of text.split(/\n\s*\n/)) {
      const uri = /^URIs:\s*(\S+\/debian)\/?\s*$/m.exec(stanza)?.[1];
      if (uri && !/^Enabled:\s*no/im.test(stanza) && !/pier-/.test(f)) return uri;
    }
    const line = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\/?\s+\S+/m.exec(text)?.[1];
    if (line) return line;
  }
  return null;
}

/** Debian's own archive for `suite`, preferred for `pkg` alone (everything else stays on the system's release). */
function addSuite(suite, pkg) {
  const archive = debianArchive();
  if (!archive) {
    process.stderr.write(`pier: this machine's apt sources name no Debian archive to take ${pkg} from (Debian ${suite}); install ${pkg} 2.10 or later, then run npm test again\n`);
    process.exit(1);
  }
  process.stderr.write(`pier: installing ${pkg} from Debian ${suite} (${archive}), pinned to that one package\n`);
  writeFileSync(`/etc/apt/sources.list.d/pier-${suite}.sources`, `Types: deb\nURIs: ${archive}\nSuites: ${suite}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`);
  writeFileSync(`/etc/apt/preferences.d/pier-${pkg}`, `Package: *\nPin: release n=${suite}\nPin-Priority: 100\n\nPackage: ${pkg}\nPin: release n=${suite}\nPin-Priority: 990\n`);
}

const missing = PACKAGES.filter((p) => !found(p));
if (missing.length > 0) {
  const names = missing.map((p) => p.pkg);
  const why = (p) => (p.atLeast ? `${p.pkg} ${p.atLeast.join('.')} or later (Debian ${p.suite})` : p.pkg);
  if (process.getuid?.() !== 0) {
    process.stderr.write(`pier: the tests need ${missing.map(why).join(' and ')}: install as root (\`sudo npm test\` installs it from Debian's packages), then run npm test again\n`);
    process.exit(1);
  }
  process.stderr.write(`pier: ${missing.map(why).join(' and ')} missing; installing Debian's package(s)\n`);
  for (const p of missing) if (p.suite) addSuite(p.suite, p.pkg);
  const opts = { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  const suites = missing.some((p) => p.suite);
  if (suites || spawnSync('apt-get', ['install', '-y', '-qq', ...names], opts).status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], opts);
    spawnSync('apt-get', ['install', '-y', '-qq', ...names], opts);
  }
  const still = missing.filter((p) => !found(p));
  if (still.length > 0) {
    process.stderr.write(`pier: could not install ${still.map(why).join(' and ')}; install with \`apt-get install -y ${still.map((p) => p.pkg).join(' ')}\`${still.some((p) => p.suite) ? ' from Debian trixie' : ''}\n`);
    process.exit(1);
  }
}
