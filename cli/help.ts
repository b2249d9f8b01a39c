import { COMMAND_TABLE, COMMANDS } from './commands.js';
import { EXIT } from './outcome.js';

/** What `pier help COMMAND` (or `pier COMMAND --help`) says beyond the usage line: what it does, its flags, an example. */
interface Help {
  summary: string;
  flags?: Record<string, string>;
  example: string;
}

const HELP: Record<string, Help> = {
  start: {
    summary: 'Runs Pier: every role in one process by default (the in-process bus), or the roles given, over NATS_URL.',
    flags: { '--roles R,R': 'edge, admin, registry, token, provider, vault, callback, upload (a subset needs NATS_URL)', '--data-dir DIR': 'where Pier keeps its state (PIER_DATA_DIR, default ./data)', '--app USER/APP': "run as that app's sidecar" },
    example: 'NATS_URL=nats://127.0.0.1:4222 NATS_CREDS=~/.pier/bus/vault.nats.env node bin/pier.js start --roles vault',
  },
  'user add': { summary: 'Creates a user and prints its first auth token (shown once).', example: 'pier user add alice --json' },
  'user token': { summary: 'Issues one more auth token for a user (shown once).', example: 'pier user token alice' },
  'user revoke': { summary: "Revokes every token of a user; its open WebSocket connections close (4004) within a second.", example: 'pier user revoke alice' },
  'user list': { summary: 'Lists users, how many tokens each has, and when they were made.', example: 'pier user list --json' },
  'app install': {
    summary: "Installs an app for a user from its manifest (and ProviderRegistry documents); prints the app's OS_SYSTEM_SERVER, OS_APP_KEY, OS_APP_SECRET and its upload folder.",
    flags: {
      '--user U': 'the user (must exist)',
      '--manifest FILE': 'the PlatformManifest.yaml',
      '--provider FILE': 'a ProviderRegistry document the app serves (repeatable)',
      '--host H': "where Pier reaches the app (callbacks, provider calls); default 127.0.0.1",
      '--credentials FILE': 'JSON {"OS_APP_KEY","OS_APP_SECRET"}: keep an existing key and secret',
      '--shared-dest': "allow its upload.dest to nest with another app's of the user (they trust each other)",
    },
    example: 'pier app install --user alice --manifest examples/PlatformManifest.yaml --json',
  },
  'app list': { summary: 'Lists installed apps (all users, or one).', flags: { '--user U': 'only this user' }, example: 'pier app list --user alice' },
  'app uninstall': { summary: "Removes an app at once (its key stops working); --purge also deletes its vault workspaces no other app of the user uses.", flags: { '--user U': 'the user', '--purge': 'delete its secrets too' }, example: 'pier app uninstall --user alice chat --purge' },
  'provider list': { summary: 'Lists provider registrations with their state.', example: 'pier provider list' },
  'provider suspend': { summary: 'Stops calls to a provider (403) until resumed.', example: 'pier provider suspend provider-notes-alice' },
  'provider resume': { summary: 'Lets calls to a suspended provider through again.', example: 'pier provider resume provider-notes-alice' },
  'vault audit': { summary: 'Who did what to which secret, newest first (never a value).', flags: { '--user U': 'only this user', '--app A': 'only this app (among the newest N)', '--op OP': 'only this operation, e.g. RetrieveSecret (among the newest N)', '--limit N': 'at most N entries (default 100)' }, example: 'pier vault audit --user alice --op RetrieveSecret --limit 20' },
  'conn list': { summary: "Every edge's WebSocket connections, per app (\"partial\": true when an edge did not answer).", flags: { '--user U': 'only this user\'s apps', '--app A': 'only this app (with --user)' }, example: 'pier conn list --user alice --app chat' },
  'conn close': { summary: 'Closes connections (code 4001) through the edges holding them; prints how many were open.', flags: { '--user U': 'the user', '--app A': 'the app' }, example: 'pier conn close --user alice --app chat 3f2a9c1b0d4e.17' },
  'upload list': { summary: 'Unfinished uploads (both protocols), newest first: path in the app\'s view, offset, size, receiving or idle.', flags: { '--limit N': 'at most N (default 200, at most 1000)' }, example: 'pier upload list' },
  'metrics history': { summary: "The console's short history of the cluster's figures (sampled while someone is signed in to the console).", example: 'pier metrics history --json' },
  'vault list': { summary: "Names, versions and who last wrote each secret of a user's workspace (never a value).", flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'test, dev, staging or prod (default prod)' }, example: 'pier vault list --user alice --workspace chat' },
  'vault get': { summary: 'Prints one secret\'s value (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod' }, example: 'pier vault get --user alice --workspace chat motto' },
  'vault set': { summary: 'Creates or updates a secret; the value comes from --value-file or standard input, never a flag (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod', '--value-file FILE': 'read the value from FILE' }, example: "printf 'Be kind' | pier vault set --user alice --workspace chat motto" },
  'vault versions': { summary: 'Lists who wrote each version of one secret, when, and its size; never a value (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod', '--deleted': "the deleted copy's versions, even when the name was created again" }, example: 'pier vault versions --user alice --workspace chat motto' },
  'vault deleted': { summary: 'Lists the deleted secrets of a workspace: who deleted each, when, and when it is destroyed unless undeleted (never a value).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod' }, example: 'pier vault deleted --user alice --workspace chat' },
  'vault restore': { summary: "Makes a new version of a secret with an earlier version's value (audited as the operator).", flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod', '--version N': 'the version whose value comes back' }, example: 'pier vault restore --user alice --workspace chat motto --version 2' },
  'vault undelete': { summary: 'Brings a deleted secret back as it was, within its recovery window (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod' }, example: 'pier vault undelete --user alice --workspace chat motto' },
  'vault destroy': { summary: 'Destroys a deleted secret, or one earlier version of a secret, for good: its value is erased (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod', '--version N': 'only this earlier version' }, example: 'pier vault destroy --user alice --workspace chat motto --version 1' },
  'vault delete': { summary: 'Deletes one secret: apps no longer see it; recoverable with undelete for PIER_VAULT_DELETED_DAYS (audited as the operator).', flags: { '--user U': 'the user', '--workspace W': 'the workspace', '--env E': 'default prod' }, example: 'pier vault delete --user alice --workspace chat motto' },
  'vault purge': { summary: 'Deletes every secret of a workspace in every env, with its data keys: the secrets a plain uninstall kept.', flags: { '--user U': 'the user', '--workspace W': 'the workspace' }, example: 'pier vault purge --user alice --workspace chat' },
  'vault rekey': { summary: 'Seals values still under their data keys anew under value keys of their own, so a destroy erases them for good (resumable; --status counts only).', example: 'pier vault rekey --status' },
  'vault rotate-master-key': { summary: 'Re-seals everything under the current master key, after every process restarted with PIER_MASTER_KEY=new and PIER_MASTER_KEY_PREVIOUS=old.', example: 'pier vault rotate-master-key' },
  'bus init': {
    summary: 'Writes the NATS accounts file (auth.conf) and one 0600 credentials file per role identity, with its state logins.',
    flags: { '--out DIR': 'default ~/.pier/bus; a folder inside a git work tree is refused', '--identity NAME=R,R': 'an extra identity for a process running several roles (repeatable)', '--force': 'write inside a git work tree anyway (keep it in .gitignore)' },
    example: 'pier bus init --identity actors=token,provider,vault',
  },
  'bus anchors': {
    summary: 'Writes the bus anchors (the public keys of the roles that hold secrets, for processes without the master key) and the callback role\'s key, from the master key.',
    flags: { '--out DIR': 'default ~/.pier/bus; a folder inside a git work tree is refused', '--force': 'write inside a git work tree anyway (keep it in .gitignore)' },
    example: 'pier bus anchors --out ~/.pier/bus   (with PIER_MASTER_KEY set, or PIER_DATA_DIR holding master.key)',
  },
  'state export': { summary: 'Writes the registry and the vault to FILE (NDJSON, 0600, secrets sealed, never overwrites).', example: 'pier state export state.ndjson' },
  'state import': { summary: 'Loads an export into an empty registry and vault started with the same master key.', example: 'pier state import state.ndjson' },
  status: {
    summary: 'The processes on the bus, their roles, the roles no process runs, the registry revision, connections and uploads.',
    flags: { '--wait SECONDS': 'first wait (up to SECONDS) until the admin API answers and every role has a live process; exit 3 if not by then' },
    example: 'pier status --wait 30',
  },
};

const ADMIN_ENV = [
  'PIER_ADMIN_URL      the admin API (default http://127.0.0.1:$PIER_ADMIN_PORT)',
  'PIER_ADMIN_PORT     its port on 127.0.0.1 (default 40090)',
  'PIER_ADMIN_TOKEN    the admin token (default: admin.token in PIER_DATA_DIR, ./data)',
  'PIER_DATA_DIR       where admin.token is looked for',
];

const EXIT_CODES = `exit codes: ${EXIT.ok} done, ${EXIT.failed} refused or failed, ${EXIT.usage} usage, ${EXIT.unreachable} unreachable (no admin API, or a role with no replica), ${EXIT.auth} auth, ${EXIT.notFound} not found, ${EXIT.conflict} conflict`;

export function globalHelp(): string {
  return [
    'usage: pier COMMAND [flags] [--json]     (pier help COMMAND, or pier COMMAND --help, for one)',
    '',
    `  pier start [--roles R,R] [--data-dir DIR] [--app USER/APP]`,
    ...Object.values(COMMANDS).map((c) => `  ${c.usage}`),
    '',
    'With --json: the answer as one JSON document on stdout; a failure as {"error":{status,code,message}} on stderr.',
    EXIT_CODES,
    'admin commands find the admin API by:',
    ...ADMIN_ENV.map((l) => `  ${l}`),
  ].join('\n');
}

/** Help for one command, or null when there is no such command. */
export function commandHelp(name: string): string | null {
  const help = HELP[name];
  const usage = name === 'start' ? 'pier start [--roles R,R] [--data-dir DIR] [--app USER/APP]' : COMMAND_TABLE[name]?.usage;
  if (!help || !usage) return null;
  const flags = Object.entries(help.flags ?? {});
  const width = Math.max(0, ...flags.map(([f]) => f.length));
  return [
    `usage: ${usage} [--json]`,
    '',
    help.summary,
    ...(flags.length > 0 ? ['', 'flags:', ...flags.map(([f, what]) => `  ${f.padEnd(width)}  ${what}`)] : []),
    ...(name === 'start' || name === 'bus init' || name === 'bus anchors' ? [] : ['', 'environment:', ...ADMIN_ENV.map((l) => `  ${l}`)]),
    '',
    `example: ${help.example}`,
    EXIT_CODES,
  ].join('\n');
}

/** The words that group commands (`user`, `vault`, `bus`...): each has help listing its commands. */
export function commandGroups(): string[] {
  return [...new Set(Object.keys(COMMANDS).filter((n) => n.includes(' ')).map((n) => n.split(' ')[0]))];
}

/** `pier user` (or `pier help user`): the group's commands, each with what it does; null when `word` groups none. */
export function groupHelp(word: string): string | null {
  const names = Object.keys(COMMANDS).filter((n) => n.startsWith(`${word} `));
  if (names.length === 0) return null;
  return [
    `pier ${word}: one of`,
    '',
    ...names.flatMap((n) => [`  ${COMMAND_TABLE[n]!.usage}`, `      ${HELP[n]?.summary ?? ''}`]),
    '',
    `pier help ${word} COMMAND (or pier ${word} COMMAND --help) for its flags and an example.`,
  ].join('\n');
}

/** Edits from `a` to `b`: insertions, deletions, substitutions and swaps of two neighbours (`stauts`). */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** Two edits at most, and fewer than half the word: a guess further away helps nobody. */
const nearMiss = (typed: string, d: number) => d <= Math.min(2, Math.floor(typed.length / 2));

/** Every flag any command takes, for "did you mean" on a mistyped one. */
export function closestFlag(typed: string, known: string[]): string | null {
  const ranked = known.map((k) => ({ k, d: distance(typed, k) })).sort((x, y) => x.d - y.d);
  return ranked.length > 0 && nearMiss(typed, ranked[0].d) ? ranked[0].k : null;
}

/**
 * The command meant by words that name none (`usr add`, `stauts`, `user ad`), for "did you mean": a
 * command or group of commands (`user`) whose words are a near miss of as many typed words. A
 * command is preferred to its group (`usr add` is `user add`, not `user`), then the nearer one; what
 * was typed exactly is no guess. Null when nothing is near.
 */
export function closestCommand(words: string[]): string | null {
  const known = ['start', 'help', ...Object.keys(COMMANDS), ...commandGroups()];
  let best: { name: string; words: number; d: number } | null = null;
  for (const name of known) {
    const n = name.split(' ').length;
    if (words.length < n) continue;
    const typed = words.slice(0, n).join(' ');
    const d = distance(typed, name);
    if (d === 0 || !nearMiss(typed, d)) continue;
    if (!best || n > best.words || (n === best.words && d < best.d)) best = { name, words: n, d };
  }
  return best?.name ?? null;
}

/** `unknown command "usr add" (did you mean "user add"?)`: what a mistyped command is told. */
export function unknownCommand(words: string[]): string {
  const meant = closestCommand(words);
  return `unknown command "${words.join(' ')}"${meant ? ` (did you mean "${meant}"?)` : ''}; see pier help`;
}

/** Every command has help (a test holds the table to it). */
export const HELPED = Object.keys(HELP);
