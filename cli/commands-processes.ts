import { ADMIN_API as API, type Status } from '../edge/admin/api.js';
import { CliError } from './admin-client.js';
import { arg, call, command, flag, given, table, type Command, type Invocation } from './command.js';

/** `--wait N`: whole seconds, 0 to 9999. */
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

/** What runs now: the connections the edges hold, the uploads under way, the cluster's figures. */
export const LIVE_COMMANDS = {
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
} satisfies Record<string, Command>;

/** The processes on the bus and the roles none runs (listed last among the commands). */
export const STATUS_COMMANDS = {
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
