import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { CliError } from './admin-client.js';

/**
 * Where `pier bus init` writes its credentials. Clear-text NATS passwords must not land where a
 * `git add .` commits them: the default is `~/.pier/bus`, and a folder inside a git work tree (Pier's
 * own checkout, an app's repository) is refused unless `--force` says the operator keeps it out of
 * version control themselves (the compose set-up does, with `.gitignore`).
 */
export function busInitOut(out: string | undefined, force: boolean, env: Record<string, string | undefined>): string {
  const home = env.HOME || env.USERPROFILE;
  if (!out && !home) throw new CliError('bus init: give --out DIR (no HOME to default to ~/.pier/bus)');
  const dir = resolve(out || join(home!, '.pier', 'bus'));
  const tree = gitWorkTreeOf(dir);
  if (tree && !force) {
    throw new CliError(`bus init: ${dir} is inside the git work tree ${tree}: the credentials would be one \`git add\` away from a commit. Leave out --out (~/.pier/bus), choose a folder outside it, or pass --force and keep the folder in .gitignore`);
  }
  return dir;
}

/** The nearest folder at or above `dir` that holds `.git`, or null. */
export function gitWorkTreeOf(dir: string): string | null {
  for (let d = resolve(dir); ; d = dirname(d)) {
    if (existsSync(join(d, '.git'))) return d;
    if (dirname(d) === d) return null;
  }
}
