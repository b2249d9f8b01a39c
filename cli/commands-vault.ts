import { ADMIN_API as API, type AuditSearched, type VaultTarget } from '../edge/admin/api.js';
import { adminCallEnvelope, adminTarget, CliError } from './admin-client.js';
import { arg, call, command, flag, given, readFile, table, type Command, type Invocation } from './command.js';

/** The user, workspace and env a vault command names, as the admin API's query. */
function vaultTarget(inv: Invocation): VaultTarget {
  // The env's value is checked by the vault (400 naming env).
  return { user: flag(inv, 'user'), workspace: flag(inv, 'workspace'), ...(inv.values.env !== undefined ? { env: flag(inv, 'env') as VaultTarget['env'] } : {}) };
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

/** Who did what to which secret (listed among the commands before the ones that act on secrets). */
export const VAULT_AUDIT = {
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
} satisfies Record<string, Command>;

/** The secrets of a workspace, their versions, and the vault's keys. */
export const VAULT_COMMANDS = {
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
} satisfies Record<string, Command>;
