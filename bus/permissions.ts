import { HISTORY_SUBJECTS } from './subjects-history.js';
import { processSubjects } from './subjects-process.js';
import { registry } from './subjects-registry.js';
import { registryEvents, registryState } from './subjects-registry-events.js';
import { tokenState } from './subjects-token.js';
import { uploadEvents, uploadState } from './subjects-upload.js';
import { vaultState } from './subjects-vault.js';

/** A replicated log's names (the shape lib/state/replicated-log.ts takes). */
interface LogNames {
  stream: string;
  subject: string;
  snapshotStream: string;
  snapshotPrefix: string;
}

/**
 * What each role may do on the bus (docs/security.md "The bus"), from the roles' declarations: an
 * actor's is its declaration (`actors/<name>/declaration.ts`, lib/runtime/actor-declaration.ts), the edge's and the admin's are in
 * `edge/bus-roles.ts`, and `cli/roles.ts` puts them together. This module only turns declarations
 * into allow-lists and matches subjects against them. The same lists are enforced twice: by nats-server (the authorization file that
 * `pier bus init` writes from them) and by each role's view of the bus in every process
 * (`guarded.ts`), so code that uses a subject its role did not declare fails in any test, on the
 * in-process bus as on NATS.
 *
 * Replies need no entry: a responder may answer the requests it received (NATS `allow_responses`),
 * and a requester hears its replies on its own inbox prefix.
 */
export const BUS_ROLES = ['edge', 'admin', 'registry', 'token', 'provider', 'vault', 'callback', 'upload'] as const;
export type BusRole = (typeof BUS_ROLES)[number];

export interface RolePermissions {
  /** Subjects (NATS wildcards allowed) the role may publish to: requests and events. */
  publish: string[];
  /** Subjects the role may subscribe to: what it serves and what it hears. */
  subscribe: string[];
}

export type Subject = string | { readonly subject: string };
const name = (s: Subject) => (typeof s === 'string' ? s : s.subject);

/** A role's declaration: endpoints it serves or calls, events it emits or hears, raw subject patterns. */
export interface Declaration {
  serves?: readonly Subject[];
  calls?: readonly Subject[];
  emits?: readonly Subject[];
  hears?: readonly Subject[];
  /**
   * JetStream state it owns (PIER_STATE=jetstream): its streams (KV buckets are streams `KV_<bucket>`),
   * the subjects it appends to, and its logs (lib/state/replicated-log.ts: a log stream and a snapshot
   * stream, which it compacts by purging).
   */
  jetstream?: JetStreamDeclaration;
}

export interface JetStreamDeclaration {
  readonly streams: readonly string[];
  /** Streams it purges (an app's lower bound, an uninstall): besides its logs'. */
  readonly purges?: readonly string[];
  /** Streams whose messages it erases one by one (a secure delete: a destroyed vault version). */
  readonly erases?: readonly string[];
  readonly buckets: readonly string[];
  readonly subjects: readonly string[];
  readonly logs?: readonly LogNames[];
}

/** Every role's declaration (cli/roles.ts builds it). */
export type RoleTable = Readonly<Record<BusRole, Declaration>>;

/** The subjects of a log's snapshots. */
const snapshotSubjects = (l: LogNames) => [`${l.snapshotPrefix}.part`, `${l.snapshotPrefix}.done`];

/**
 * The JetStream API subjects one role needs for its own streams and nothing else: create, update
 * and read them, consume them, write its buckets and append to its subjects. Never delete a
 * stream, never touch another role's; purge only its own logs (compaction below a snapshot).
 */
function jetStreamSubjects(d: JetStreamDeclaration): string[] {
  const logs = d.logs ?? [];
  const streams = [...d.streams, ...d.buckets.map((b) => `KV_${b}`), ...logs.flatMap((l) => [l.stream, l.snapshotStream])];
  return [
    ...logs.flatMap((l) => [`$JS.API.STREAM.PURGE.${l.stream}`, `$JS.API.STREAM.PURGE.${l.snapshotStream}`, l.subject, ...snapshotSubjects(l)]),
    ...(d.purges ?? []).map((s) => `$JS.API.STREAM.PURGE.${s}`),
    ...(d.erases ?? []).map((s) => `$JS.API.STREAM.MSG.DELETE.${s}`),
    '$JS.API.INFO',
    ...streams.flatMap((s) => [
      `$JS.API.STREAM.INFO.${s}`,
      `$JS.API.STREAM.CREATE.${s}`,
      `$JS.API.STREAM.UPDATE.${s}`,
      `$JS.API.STREAM.MSG.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}.>`,
      `$JS.API.CONSUMER.CREATE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.INFO.${s}.*`,
      `$JS.API.CONSUMER.DELETE.${s}.*`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.*`,
    ]),
    ...d.buckets.map((b) => `$KV.${b}.>`),
    ...d.subjects,
  ];
}

/** Every process, whatever its roles: presence, the registry cache. */
const everyProcess: Declaration = {
  // Each role announces itself on its own heartbeat subject (permissionsOf adds it).
  hears: [processSubjects.heartbeats, registryEvents.changes, registryEvents.heartbeat],
  serves: [processSubjects.describe],
  calls: [registry.snapshot],
};

/** Published for parties outside Pier, or captured by a JetStream stream: nobody in Pier subscribes to them. */
export const EXTERNAL_EVENTS: readonly string[] = [
  uploadEvents.completed.subject,
  vaultState.auditSubject,
  tokenState.subject,
  HISTORY_SUBJECTS,
  ...[registryState, uploadState].flatMap((l) => [l.subject, ...snapshotSubjects(l)]),
];

/**
 * A role's rights on the service bus. No JetStream API subject is among them: JetStream acts with
 * its account's authority (a push consumer delivers, a stream captures, a direct get answers onto
 * any subject of the account, whatever the creator's allow-lists say; nats-server issue #8274), so
 * a role's state lives in an account of its own (`statePermissionsFor`) that holds no service.
 */
function permissionsOf(d: Declaration): RolePermissions {
  return {
    publish: [...(d.calls ?? []), ...(d.emits ?? [])].map(name),
    subscribe: [...(d.serves ?? []), ...(d.hears ?? [])].map(name),
  };
}

/**
 * The roles that keep state on JetStream (PIER_STATE=jetstream), each in its own NATS account:
 * configuration reads their state logins before any declaration is loaded.
 * `test/unit/bus/permissions.test.ts` holds it equal to the roles whose declarations have `jetstream`.
 */
export const STATE_ROLES: readonly BusRole[] = ['registry', 'token', 'vault', 'upload', 'edge'];

/**
 * State roles whose state login is optional: the edge's (its gateway history, added in 0.3) — an
 * edge started with the credentials of an earlier `pier bus init` runs, and keeps no history, rather
 * than stop (docs/operations.md "Upgrading": a new account is an expand step).
 */
export const OPTIONAL_STATE_ROLES: readonly BusRole[] = ['edge'];

/** The NATS account holding `role`'s JetStream state (`pier bus init` writes one per state role). */
export const stateAccountOf = (role: BusRole) => `PIER_STATE_${role.toUpperCase()}`;

/**
 * The rights of a role's state identity inside its own state account: its streams, buckets and
 * subjects, and its inbox. Whatever JetStream does with them stays inside that account, where no
 * Pier service listens and no other role's traffic passes; the allow-lists only keep the role's
 * own code from reaching beyond its streams by mistake.
 */
export function statePermissionsFor(table: RoleTable, role: BusRole, inboxPrefix: string): RolePermissions {
  const js = table[role].jetstream;
  if (!js) throw new Error(`role ${role} keeps no state on JetStream`);
  return { publish: [...new Set(jetStreamSubjects(js))].sort(), subscribe: [`${inboxPrefix}.>`] };
}

/**
 * The allow-lists of a process running `roles` (the union of theirs and every process's), with
 * the inbox prefix its replies arrive on.
 */
export function permissionsFor(table: RoleTable, roles: readonly BusRole[], inboxPrefix: string): RolePermissions {
  const parts = [everyProcess, ...roles.map((r) => withHeartbeat(r, table[r]))].map(permissionsOf);
  const unique = (xs: string[]) => [...new Set(xs)].sort();
  return {
    publish: unique(parts.flatMap((p) => p.publish)),
    subscribe: unique([...parts.flatMap((p) => p.subscribe), `${inboxPrefix}.>`]),
  };
}

/** A role announces its replicas on its own heartbeat subject, which no other role may publish. */
const withHeartbeat = (role: BusRole, d: Declaration): Declaration => ({ ...d, emits: [...(d.emits ?? []), processSubjects.heartbeat(role)] });

/** One role's own declaration, without what every process has (for docs and tests). */
export function declaredBy(table: RoleTable, role: BusRole): RolePermissions {
  return permissionsOf(withHeartbeat(role, table[role]));
}

/**
 * Whether `pattern` (an allow-list entry) covers `subject` (a subject, or a subscription that may
 * itself hold wildcards): `*` covers one token (a `*` included), `>` covers one or more.
 */
export function covers(pattern: string, subject: string): boolean {
  return coversSplit(pattern.split('.'), subject.split('.'));
}

export const allowed = (list: readonly string[], subject: string) => list.some((p) => covers(p, subject));

/**
 * `allowed` for one fixed list, checked on every message: the patterns are split once, here, and
 * each subject once per check (not once per pattern), the same rules as `covers`.
 */
export function allowListMatcher(list: readonly string[]): (subject: string) => boolean {
  const patterns = list.map((p) => p.split('.'));
  // The answer for a subject never changes (the list is fixed): remembered, so a role's hot
  // subjects are not split on every message. Bounded, as subjects may name users and connections.
  const known = new Map<string, boolean>();
  return (subject) => {
    let may = known.get(subject);
    if (may === undefined) {
      const s = subject.split('.');
      may = patterns.some((p) => coversSplit(p, s));
      if (known.size >= MATCHER_MEMORY) known.clear();
      known.set(subject, may);
    }
    return may;
  };
}

/** Subjects whose answer one matcher remembers at once (past it, all are forgotten). */
const MATCHER_MEMORY = 4_096;

function coversSplit(p: readonly string[], s: readonly string[]): boolean {
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (s[i] === '>') return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}
