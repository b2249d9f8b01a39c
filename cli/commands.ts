import { readFileSync } from 'node:fs';
import { busInitOut } from './bus-init-out.js';
import { BUS_ROLES, type BusRole } from '../bus/permissions.js';
import { planIdentities, writeBusInit } from './bus-init.js';
import { writeBusAnchors } from './bus-anchors.js';
import { adminCall, adminCallEnvelope, adminTarget, CliError, exportState, importState, type CallInput } from './admin-client.js';
import { ADMIN_API as API, type AdminRoute, type AuditSearched, type InstallRequest, type Status, type VaultTarget } from '../edge/admin/api.js';

export interface Invocation {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  env: Record<string, string | undefined>;
}

export interface Command<D = unknown> {
  usage: string;
  run(inv: Invocation): Promise<D>;
  /** Human-readable rendering when `--json` is not given. */
  text?(data: D): string;
}

/** A command whose `text` reads what its `run` answers (typed by the admin route it calls); its `--json` prints that. */
const command = <D>(c: Command<D>): Command<D> => c;

/** What a command prints with `--json`: the answer type of the admin route it calls (edge/admin/api.ts). */
export type JsonOf<C> = C extends Command<infer D> ? D : never;

function readFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

function arg(inv: Invocation, index: number, name: string): string {
  const v = inv.positionals[index];
  if (v === undefined) throw new CliError(`missing ${name}`, undefined, 'usage');
  return v;
}

/** The user, workspace and env a vault command names, as the admin API's query. */
function vaultTarget(inv: Invocation): VaultTarget {
  // The env's value is checked by the vault (400 naming env).
  return { user: flag(inv, 'user'), workspace: flag(inv, 'workspace'), ...(inv.values.env !== undefined ? { env: flag(inv, 'env') as VaultTarget['env'] } : {}) };
}

function seconds(text: string, name: string): number {
  if (!/^\d{1,4}$/.test(text)) throw new CliError(`${name}: must be a whole number of seconds (0 to 9999)`, undefined, 'usage');
  return Number(text);
}

/**
 * `pier status --wait N`: the status once the admin API answers and every role has a live process
 * (a script starting a cluster waits on this, not on a sleep), or after N seconds a failure naming
 * what was still missing.
 */
async function statusOnceReady(inv: Invocation, waitSeconds: number): Promise<Status> {
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    let why: string;
    try {
      const status = await call(inv, API.status);
      if (status.missingRoles.length === 0) return status;
      why = `no ${status.missingRoles.join(', ')} replica is running`;
    } catch (err) {
      // Not up yet: no admin API, a role not answering, or the admin process has not written its
      // token yet. A wrong token (401) or anything else is an answer: said at once.
      const notYet = err instanceof CliError && (err.kind === 'unreachable' || err.status === 503 || (err.kind === 'auth' && err.status === undefined));
      if (!notYet) throw err;
      why = (err as CliError).message;
    }
    if (Date.now() >= deadline) throw new CliError(`not ready after ${waitSeconds} s: ${why}`, undefined, 'unreachable');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The flags among `names` that were given, as a query. */
function given<K extends string>(inv: Invocation, names: K[]): { [N in K]?: string } {
  const q: { [N in K]?: string } = {};
  for (const k of names) if (inv.values[k] !== undefined) q[k] = flag(inv, k);
  return q;
}

/** A secret's value from standard input (never a flag: flags show in the process list). */
async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new CliError('vault set: give the value on standard input (or --value-file FILE); a flag would show it in the process list', undefined, 'usage');
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).byteLength;
    // Far past the vault's 64 KiB: a value this size is a mistake (a file piped by accident), not a secret.
    if (size > 1024 * 1024) throw new CliError('vault set: standard input is over 1 MiB; a secret is at most 64 KiB', undefined, 'usage');
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts).toString('utf8').replace(/\n$/, '');
}

/** `--version N`: a whole number from 1. */
function versionFlag(inv: Invocation): number {
  const text = flag(inv, 'version');
  if (!/^[1-9]\d{0,14}$/.test(text)) throw new CliError(`--version: must be a whole number from 1, not ${JSON.stringify(text)}`, undefined, 'usage');
  return Number(text);
}

function flag(inv: Invocation, name: string): string {
  const v = inv.values[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`missing --${name}`, undefined, 'usage');
  return v;
}

const call = <R extends AdminRoute>(inv: Invocation, route: R, input: CallInput<R> = {}) => adminCall(adminTarget(inv.env), route, input);
/**
 * Control characters (newline, tab, ANSI escapes, C1) as visible `\xNN`: a value stored as an app
 * sent it can neither forge a row nor drive the operator's terminal. Backslashes are doubled so an
 * escape cannot be faked either.
 */
export const printable = (v: string) => v.replace(/[\\\u0000-\u001f\u007f-\u009f]/g, (c) => (c === '\\' ? '\\\\' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
const table = (rows: string[][]) => rows.map((r) => r.map(printable).join('\t')).join('\n');

/** Admin commands, by their words. `pier start` is handled by main.ts. */
export const COMMANDS = {
  'user add': command({
    usage: 'pier user add NAME',
    run: (inv) => call(inv, API.userAdd, { body: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `user ${d.name} created\ntoken: ${d.token}`,
  }),
  'user token': command({
    usage: 'pier user token NAME',
    run: (inv) => call(inv, API.userToken, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `token for ${d.name}: ${d.token}`,
  }),
  'user revoke': command({
    usage: 'pier user revoke NAME',
    run: (inv) => call(inv, API.userRevoke, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `revoked ${d.revoked} token(s) of ${d.name}`,
  }),
  'user list': command({
    usage: 'pier user list',
    run: (inv) => call(inv, API.userList),
    text: (d) => table([['NAME', 'TOKENS', 'CREATED'], ...d.map((u) => [u.name, String(u.tokens), u.createdAt])]),
  }),
  'app install': command({
    usage: 'pier app install --user U --manifest FILE [--provider FILE]... [--host H] [--credentials FILE] [--shared-dest]',
    run: (inv) => {
      const providers = ((inv.values.provider as string[] | undefined) ?? []).map((p) => readFile(p, '--provider'));
      const body: InstallRequest = { user: flag(inv, 'user'), manifest: readFile(flag(inv, 'manifest'), '--manifest'), providers };
      if (inv.values.host !== undefined) body.host = flag(inv, 'host');
      // Lets its upload.dest nest with another app's of the user: the operator vouches that they trust each other.
      if (inv.values['shared-dest'] === true) body.sharedDest = true;
      // A JSON file {"OS_APP_KEY", "OS_APP_SECRET"}: an app moving in keeps its credentials.
      // A file, not flags, so the secret never shows in the process list.
      if (inv.values.credentials !== undefined) {
        try {
          // Checked by the admin API (400 naming the field).
          body.credentials = JSON.parse(readFile(flag(inv, 'credentials'), '--credentials'));
        } catch (err) {
          if (err instanceof CliError) throw err;
          throw new CliError('--credentials: the file is not valid JSON');
        }
      }
      return call(inv, API.appInstall, { body });
    },
    // The environment for the app's chart, its upload folder (or why none).
    text: (d) =>
      [
        `app ${d.app} installed for ${d.user}`,
        ...Object.entries(d.env).map(([k, v]) => `${k}=${v}`),
        ...(d.uploadDir ? [`uploadDir=${d.uploadDir}`] : []),
        ...(d.uploadDirError ? [`WARNING: no upload folder: ${d.uploadDirError}`] : []),
      ].join('\n'),
  }),
  'app list': command({
    usage: 'pier app list [--user U]',
    run: (inv) => call(inv, API.appList, { query: given(inv, ['user']) }),
    text: (d) => table([['USER', 'APP', 'VERSION', 'APP KEY', 'PROVIDERS'], ...d.map((a) => [a.user, a.app, a.version, a.appKey, a.providers.join(',')])]),
  }),
  'app uninstall': command({
    usage: 'pier app uninstall --user U APP [--purge]',
    run: (inv) => call(inv, API.appUninstall, { params: { user: flag(inv, 'user'), app: arg(inv, 0, 'APP') }, query: inv.values.purge ? { purge: 'true' } : {} }),
    text: (d) => `app ${d.app} uninstalled for ${d.user}${d.purged ? ' (purged)' : ''}`,
  }),
  'provider list': command({
    usage: 'pier provider list',
    run: (inv) => call(inv, API.providerList),
    text: (d) => table([['NAME', 'USER', 'APP', 'TARGET', 'ENDPOINT', 'STATE'], ...d.map((p) => [p.name, p.user, p.app, `${p.dataType}/${p.group}/${p.version}`, p.endpoint, p.state])]),
  }),
  'provider suspend': command({
    usage: 'pier provider suspend NAME',
    run: (inv) => call(inv, API.providerSuspend, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `provider ${d.name} is ${d.state}`,
  }),
  'provider resume': command({
    usage: 'pier provider resume NAME',
    run: (inv) => call(inv, API.providerResume, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `provider ${d.name} is ${d.state}`,
  }),
  'vault audit': command({
    usage: 'pier vault audit [--user U] [--app A] [--op OP] [--limit N]',
    run: async (inv) => {
      const { data, beside } = await adminCallEnvelope(adminTarget(inv.env), API.vaultAudit, { query: given(inv, ['user', 'app', 'op', 'limit']) });
      const searched = beside.searched as AuditSearched | undefined;
      // On stderr: standard output stays the one document (or the table) asked for.
      if (searched) process.stderr.write(`pier: searched the newest ${searched.entries} entries (back to ${searched.backTo ?? '?'}) and stopped there: older ones were not searched; narrow with --user, --app or --op\n`);
      return data;
    },
    text: (d) => table([['AT', 'USER', 'APP', 'OP', 'WORKSPACE', 'ENV', 'NAME', 'OUTCOME'], ...d.map((e) => [e.at, e.user ?? '-', e.app ?? '-', e.op, e.workspace, e.env ?? '-', e.name ?? '-', e.outcome])]),
  }),
  'conn list': command({
    usage: 'pier conn list [--user U [--app A]]',
    run: (inv) => call(inv, API.connections, { query: given(inv, ['user', 'app']) }),
    text: (d) => table([['CONNECTION', 'USER', 'APP', 'EDGE', 'CLIENT'], ...d.flatMap((a) => a.conns.map((c) => [c.id, c.user, a.app, c.edge ?? '?', c.userAgent || '-']))]),
  }),
  'conn close': command({
    usage: 'pier conn close --user U --app A CONN [CONN...]',
    run: (inv) => call(inv, API.connectionsClose, { body: { user: flag(inv, 'user'), app: flag(inv, 'app'), conns: inv.positionals.length > 0 ? inv.positionals : [arg(inv, 0, 'CONN')] } }),
    text: (d) => `${d.closed} connection(s) closed`,
  }),
  'upload list': command({
    usage: 'pier upload list [--limit N]',
    run: (inv) => call(inv, API.uploads, { query: given(inv, ['limit']) }),
    text: (d) => table([['ID', 'USER', 'APP', 'PATH', 'OFFSET', 'SIZE', 'PROTOCOL', 'STATE'], ...d.uploads.map((u) => [u.id, u.user, u.app, u.path, String(u.offset), u.size === null ? '?' : String(u.size), u.protocol, u.writing ? 'receiving' : 'idle'])]),
  }),
  'metrics history': command({
    usage: 'pier metrics history',
    run: (inv) => call(inv, API.metricsHistory),
    text: (d) => table([['AT', 'HTTP/S', 'HTTP P99 MS', 'WS MSG/S', 'CB RETRIES/S', 'BUS REFUSALS/S'], ...d.samples.map((s) => [new Date(s.at).toISOString(), String(s.httpRequestsPerSecond), s.httpP99Ms === null ? '-' : String(s.httpP99Ms), String(s.wsMessagesPerSecond), String(s.callbackRetriesPerSecond), String(s.busRefusalsPerSecond)])]),
  }),
  'vault list': command({
    usage: 'pier vault list --user U --workspace W [--env E]',
    run: (inv) => call(inv, API.vaultList, { query: vaultTarget(inv) }),
    text: (d) => table([['NAME', 'VERSION', 'UPDATED', 'BY'], ...d.map((s) => [s.name, String(s.version), s.updatedAt, s.updatedBy])]),
  }),
  'vault get': command({
    usage: 'pier vault get --user U --workspace W [--env E] NAME   (prints the value)',
    run: (inv) => call(inv, API.vaultGet, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME') } }),
    text: (d) => String(d.value),
  }),
  'vault versions': command({
    usage: 'pier vault versions --user U --workspace W [--env E] NAME [--deleted]   (who wrote each version and when; never a value)',
    run: (inv) => call(inv, API.vaultVersions, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME'), ...(inv.values.deleted ? { deleted: 'true' as const } : {}) } }),
    text: (d) =>
      [
        ...(d.deleted ? [`deleted ${d.deleted.at} by ${d.deleted.by}; destroyed ${d.deleted.destroyAt} unless undeleted`] : []),
        table([['VERSION', 'AT', 'BY', 'SIZE', 'VALUE'], ...d.versions.map((v) => [`${v.version}${v.current ? ' (current)' : ''}`, v.at, v.by, v.size === null ? '?' : `${v.size} B`, v.kept ? 'kept' : 'not kept'])]),
      ].join('\n'),
  }),
  'vault deleted': command({
    usage: 'pier vault deleted --user U --workspace W [--env E]   (deleted secrets, recoverable until their window ends)',
    run: (inv) => call(inv, API.vaultDeleted, { query: vaultTarget(inv) }),
    text: (d) => table([['NAME', 'VERSION', 'DELETED', 'BY', 'DESTROYED AT', 'EARLIER KEPT'], ...d.map((r) => [r.name, String(r.version), r.deletedAt, r.deletedBy, r.destroyAt, String(r.versionsKept)])]),
  }),
  'vault restore': command({
    usage: 'pier vault restore --user U --workspace W [--env E] NAME --version N   (a new version with version N\'s value)',
    run: (inv) => call(inv, API.vaultRestore, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME') }, body: { version: versionFlag(inv) } }),
    text: (d) => `restored version ${d.restored} as version ${d.version}`,
  }),
  'vault undelete': command({
    usage: 'pier vault undelete --user U --workspace W [--env E] NAME   (a deleted secret back, as it was)',
    run: (inv) => call(inv, API.vaultUndelete, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME') } }),
    text: (d) => `undeleted (version ${d.version})`,
  }),
  'vault destroy': command({
    usage: 'pier vault destroy --user U --workspace W [--env E] NAME [--version N]   (a deleted secret, or one earlier version, for good)',
    run: (inv) => call(inv, API.vaultDestroy, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME') }, body: inv.values.version === undefined ? {} : { version: versionFlag(inv) } }),
    text: (d) => `destroyed version(s) ${d.destroyed.join(', ')}`,
  }),
  'vault set': command({
    usage: 'pier vault set --user U --workspace W [--env E] NAME [--value-file FILE]   (the value from FILE, or standard input)',
    run: async (inv) => {
      const name = arg(inv, 0, 'NAME');
      const value = inv.values['value-file'] !== undefined ? readFile(flag(inv, 'value-file'), '--value-file') : await readStdin();
      return call(inv, API.vaultSet, { query: { ...vaultTarget(inv), name }, body: { value } });
    },
    text: (d) => `set (version ${d.version})`,
  }),
  'vault delete': command({
    usage: 'pier vault delete --user U --workspace W [--env E] NAME',
    run: (inv) => call(inv, API.vaultDelete, { query: { ...vaultTarget(inv), name: arg(inv, 0, 'NAME') } }),
    text: () => 'deleted',
  }),
  'vault purge': command({
    usage: 'pier vault purge --user U --workspace W   (every secret of the workspace, every env: what uninstall --purge does, later)',
    run: (inv) => call(inv, API.vaultPurge, { query: { user: flag(inv, 'user'), workspace: flag(inv, 'workspace') } }),
    text: (d) => `purged ${d.purged} secret(s)`,
  }),
  'vault rekey': command({
    usage: 'pier vault rekey [--status] [--limit N]   (values still sealed with their data keys sealed anew under value keys of their own; --status counts only)',
    run: (inv) => (inv.values.status ? call(inv, API.vaultFormats) : call(inv, API.vaultRekey, { body: inv.values.limit === undefined ? {} : { limit: Number(flag(inv, 'limit')) } })),
    text: (d) =>
      [
        ...(d.rekeyed > 0 ? [`sealed ${d.rekeyed} value(s) anew under value keys`] : []),
        `secrets: ${d.secrets.valueKeys} under value keys, ${d.secrets.dataKeys} under their data keys`,
        `versions: ${d.versions.valueKeys} under value keys, ${d.versions.dataKeys} under their data keys`,
        ...(d.unreadable > 0 ? [`${d.unreadable} value(s) could not be opened and were left as they are`] : []),
        d.sealingUnderValueKeys ? 'new values: sealed under value keys' : 'new values: sealed with their data keys (a vault replica of an earlier release runs)',
      ].join('\n'),
  }),
  'vault rotate-master-key': command({
    usage: 'pier vault rotate-master-key   (after restarting with the new PIER_MASTER_KEY and PIER_MASTER_KEY_PREVIOUS)',
    run: (inv) => call(inv, API.rotateMasterKey),
    text: (d) => `re-wrapped ${d.rewrappedDataKeys} data key(s), re-sealed ${d.resealedAppSecrets} app secret(s): PIER_MASTER_KEY_PREVIOUS can go`,
  }),
  'bus init': command({
    usage: 'pier bus init [--out DIR (default ~/.pier/bus)] [--identity NAME=ROLE,ROLE]... [--force (a folder inside a git work tree)]',
    run: async (inv) => {
      const extra: Record<string, BusRole[]> = {};
      for (const spec of (inv.values.identity as string[] | undefined) ?? []) {
        const m = /^([^=]+)=(.+)$/.exec(spec);
        if (!m) throw new CliError(`--identity: "${spec}" must be NAME=ROLE,ROLE`, undefined, 'usage');
        const roles = m[2].split(',').map((r) => r.trim());
        const unknown = roles.find((r) => !(BUS_ROLES as readonly string[]).includes(r));
        if (unknown) throw new CliError(`--identity: unknown role "${unknown}" (roles: ${BUS_ROLES.join(', ')})`, undefined, 'usage');
        extra[m[1]] = roles as BusRole[];
      }
      try {
        return writeBusInit(busInitOut(inv.values.out as string | undefined, inv.values.force === true, inv.env), planIdentities(extra));
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`bus init: ${(err as Error).message}`);
      }
    },
    text: (d) =>
      [
        `nats-server accounts: ${d.server} (include it from nats-server.conf): PIER for the services, PIER_STATE_<ROLE> for each role's JetStream state`,
        ...d.identities.map((i) => `  ${i.user.padEnd(18)} ${i.creds}  (${i.roles.join(',')})`),
        'Start each Pier process with NATS_CREDS=<its .nats.env file> (it carries the role\'s state logins too).',
      ].join('\n'),
  }),
  'bus anchors': command({
    usage: 'pier bus anchors [--out DIR (default ~/.pier/bus)] [--force (a folder inside a git work tree)]   (reads PIER_MASTER_KEY, or master.key in PIER_DATA_DIR)',
    run: async (inv) => {
      try {
        return writeBusAnchors(busInitOut(inv.values.out as string | undefined, inv.values.force === true, inv.env), inv.env);
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`bus anchors: ${(err as Error).message}`);
      }
    },
    text: (d) =>
      [
        `bus anchors: ${d.anchors} (public: PIER_BUS_ANCHORS=<it> for every process without the master key)`,
        `callback key: ${d.callbackKey} (secret, 0600: PIER_CALLBACK_KEY=<it> for callback replicas only)`,
        `admin key: ${d.adminKey} (secret, 0600: PIER_ADMIN_KEY=<it> for the admin process only)`,
        `history key: ${d.historyKey} (secret, 0600: PIER_HISTORY_KEY=<it> for edges: seals the gateway's history at rest)`,
        ...(d.masterKeys > 1 ? ['Both the current and the previous master key are pinned: write them again once the rotation is done.'] : []),
      ].join('\n'),
  }),
  'state export': command({
    usage: 'pier state export FILE   (the registry and the vault, secrets sealed; no master key)',
    run: (inv) => exportState(adminTarget(inv.env), arg(inv, 0, 'FILE')),
    text: (d) => `exported ${d.records} record(s) to ${d.file}`,
  }),
  'state import': command({
    usage: 'pier state import FILE   (into an empty registry and vault, with the same PIER_MASTER_KEY)',
    run: (inv) => importState(adminTarget(inv.env), arg(inv, 0, 'FILE')),
    text: (d) => `imported ${d.imported} record(s)`,
  }),
  status: command({
    usage: 'pier status [--wait SECONDS]',
    run: (inv) => (inv.values.wait === undefined ? call(inv, API.status) : statusOnceReady(inv, seconds(flag(inv, 'wait'), '--wait'))),
    text: (d) =>
      [
        `bus: ${d.bus.kind} (${d.bus.connected ? 'connected' : 'disconnected'})`,
        `roles: ${d.roles.join(', ')}`,
        ...(d.missingRoles.length > 0 ? [`MISSING: no ${d.missingRoles.join(', ')} replica is running (their requests answer 503)`] : []),
        ...(d.mismatched ?? []).map((m) => `MISMATCH: ${m.roles.join(',')} process ${m.id} (Pier ${m.version ?? 'older than 0.2'}, wire ${m.wire.oldest}-${m.wire.speaks}) shares no wire format with this admin (wire ${d.wire.oldest}-${d.wire.speaks}): nothing is routed to it; upgrade one release at a time`),
        `registry revision: ${d.registry.revision}${d.registry.fresh ? '' : ' (stale)'}`,
        `connections: ${d.connections}, uploads in progress: ${d.uploads}`,
        ...versionsLine(d.replicas),
        'replicas:',
        ...d.replicas.map((r) => `  ${r.id}  ${r.roles.join(',')}  Pier ${r.version ?? 'before 0.2.0'} (wire ${r.wire.oldest}-${r.wire.speaks})  since ${r.startedAt}`),
      ].join('\n'),
  }),
} satisfies Record<string, Command>;

/** During a rolling upgrade (more than one release running), how many processes run each: one line. */
function versionsLine(replicas: ReadonlyArray<{ version?: string }>): string[] {
  const count = new Map<string, number>();
  for (const r of replicas) count.set(r.version ?? 'before 0.2.0', (count.get(r.version ?? 'before 0.2.0') ?? 0) + 1);
  if (count.size < 2) return [];
  return [`versions: ${[...count].map(([v, n]) => `Pier ${v} × ${n}`).join(', ')} (a rolling upgrade in progress, or one left half done)`];
}

/** The commands by their words, for lookups by what was typed. */
export const COMMAND_TABLE: Readonly<Record<string, Command | undefined>> = COMMANDS;
