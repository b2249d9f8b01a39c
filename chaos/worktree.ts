import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../test/helpers/pier.js';
import type { Build } from './processes.js';

/**
 * The previous release, built beside this checkout: a detached git worktree of its commit under the
 * run's folder, its dependencies, its three tsc passes. node_modules is reused when this checkout's
 * holds every package the old lockfile installs (`sameDependencies`), as a hard-link copy (`cp -al`):
 * a symlink would make Node resolve the packages' real paths into this checkout, and the SDK (a
 * `file:` link, relative) must resolve to the worktree's own. Otherwise `npm ci`, which a run pays once.
 */
export interface Worktree {
  build: Build;
  root: string;
  commit: string;
  /** Whether node_modules was reused (this checkout's holds the old tree) or installed. */
  reused: boolean;
  /** Wall time of the whole preparation (checkout, dependencies, build). */
  ms: number;
}

function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`\`${cmd} ${args.join(' ')}\` in ${cwd} failed (${r.status ?? r.signal}): ${`${r.stderr ?? ''}${r.stdout ?? ''}`.slice(-3000)}`);
  return r.stdout;
}

/**
 * The commit to upgrade from: `--from` when given, else releases.json's `previous.commit` (the file the
 * release names its predecessor in); with neither, an error saying so.
 */
export function previousRelease(from: string | undefined): { commit: string; label: string } {
  const named = from === undefined ? readReleases() : { commit: from, version: from };
  const commit = run('git', ['rev-parse', '--verify', `${named.commit}^{commit}`], ROOT).trim();
  return { commit, label: from === undefined ? `release ${named.version}` : from };
}

function readReleases(): { commit: string; version: string } {
  const path = join(ROOT, 'releases.json');
  if (!existsSync(path)) throw new Error('no releases.json names the previous release: give --from <commit> (e.g. --from HEAD for identical builds)');
  const json = JSON.parse(readFileSync(path, 'utf8')) as { previous?: { commit?: unknown; version?: unknown } };
  const commit = json.previous?.commit;
  if (typeof commit !== 'string' || !/^[0-9a-f]{40}$/.test(commit)) throw new Error(`releases.json: previous.commit is not a 40-hex commit: ${JSON.stringify(commit)}`);
  return { commit, version: String(json.previous?.version ?? commit.slice(0, 12)) };
}

export function buildWorktree(commit: string, dir: string, log: (m: string) => void): Worktree {
  const started = Date.now();
  const root = join(dir, 'from');
  run('git', ['worktree', 'add', '--detach', root, commit], ROOT);
  const same = existsSync(join(root, 'package-lock.json')) && sameDependencies(readFileSync(join(root, 'package-lock.json')), readFileSync(join(ROOT, 'package-lock.json')));
  if (same) {
    log(`worktree ${commit.slice(0, 12)}: this checkout's node_modules holds every package of its lockfile, hard-linked`);
    run('cp', ['-al', join(ROOT, 'node_modules'), join(root, 'node_modules')], ROOT);
  } else {
    log(`worktree ${commit.slice(0, 12)}: lockfiles differ, npm ci`);
    run('npm', ['ci', '--no-audit', '--no-fund'], root);
  }
  // The three passes of its own `npm run build` (whatever its package.json says, its tsc).
  log(`worktree ${commit.slice(0, 12)}: building`);
  run('npm', ['run', 'build'], root);
  const bin = join(root, 'bin', 'pier.js');
  if (!existsSync(bin)) throw new Error(`worktree ${commit}: no bin/pier.js after the build`);
  return { build: { name: `from ${commit.slice(0, 12)}`, bin }, root, commit, reused: same, ms: Date.now() - started };
}

/**
 * Whether this checkout's node_modules holds every package the old build's lockfile installs, at
 * the same path and of the same resolution: then the old build runs on a hard-linked copy (what it
 * never imports, a dependency added since, is inert). Equal bytes, or every package entry of `old`
 * (the root's own aside: its version and dependency list change with every release) equal in `now`.
 */
export function sameDependencies(old: Buffer, now: Buffer): boolean {
  if (old.equals(now)) return true;
  const packages = (bytes: Buffer): Record<string, unknown> | null => {
    try {
      const lock = JSON.parse(bytes.toString('utf8')) as { lockfileVersion?: unknown; packages?: Record<string, unknown> };
      return lock.packages && typeof lock.packages === 'object' ? lock.packages : null;
    } catch {
      return null;
    }
  };
  const [a, b] = [packages(old), packages(now)];
  if (!a || !b) return false;
  return Object.entries(a).every(([path, entry]) => path === '' || (path in b && JSON.stringify(entry) === JSON.stringify(b[path])));
}

/** Removes the worktree (and git's record of it), whatever state it is in; never throws. */
export function removeWorktree(root: string): string | null {
  const r = spawnSync('git', ['worktree', 'remove', '--force', root], { cwd: ROOT, encoding: 'utf8' });
  if (r.status === 0) return null;
  spawnSync('git', ['worktree', 'prune'], { cwd: ROOT });
  return `git worktree remove ${root}: ${r.stderr.trim()}`;
}
