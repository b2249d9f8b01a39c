import type { Endpoint, EventSubject } from './rpc.js';
import { streamSubject } from './stream.js';
import { gatewaySubjects } from './subjects-gateway.js';
import { processSubjects } from './subjects-process.js';
import { provider } from './subjects-provider.js';
import { registry, registryEvents, registryState } from './subjects-registry.js';
import { token, tokenState } from './subjects-token.js';
import { upload, uploadEvents, uploadNotices, uploadState, uploadSubjects } from './subjects-upload.js';
import { vault, vaultEvents, vaultState } from './subjects-vault.js';
import { stateEndpoints } from './subjects-state.js';

/** A replicated log's names (the shape lib/replicated-log.ts takes). */
interface LogNames {
  stream: string;
  subject: string;
  snapshotStream: string;
  snapshotPrefix: string;
}

/**
 * What each role may do on the bus (CONTRACT.md section 9), declared from the subjects of `bus/`
 * themselves. The same lists are enforced twice: by nats-server (the authorization file that
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

type Subject = string | Endpoint<unknown, unknown> | EventSubject<unknown>;
const name = (s: Subject) => (typeof s === 'string' ? s : s.subject);

/** A role's declaration: endpoints it serves or calls, events it emits or hears, raw subject patterns. */
interface Declaration {
  serves?: Subject[];
  calls?: Subject[];
  emits?: Subject[];
  hears?: Subject[];
  /**
   * JetStream state it owns (PIER_STATE=jetstream): its streams (KV buckets are streams `KV_<bucket>`),
   * the subjects it appends to, and its logs (lib/replicated-log.ts: a log stream and a snapshot
   * stream, which it compacts by purging).
   */
  jetstream?: { streams: string[]; buckets: string[]; subjects: string[]; logs?: LogNames[] };
}

/** The subjects of a log's snapshots. */
const snapshotSubjects = (l: LogNames) => [`${l.snapshotPrefix}.part`, `${l.snapshotPrefix}.done`];

/**
 * The JetStream API subjects one role needs for its own streams and nothing else: create, update
 * and read them, consume them, write its buckets and append to its subjects. Never delete a
 * stream, never touch another role's; purge only its own logs (compaction below a snapshot).
 */
function jetStreamSubjects(d: NonNullable<Declaration['jetstream']>): string[] {
  const logs = d.logs ?? [];
  const streams = [...d.streams, ...d.buckets.map((b) => `KV_${b}`), ...logs.flatMap((l) => [l.stream, l.snapshotStream])];
  return [
    ...logs.flatMap((l) => [`$JS.API.STREAM.PURGE.${l.stream}`, `$JS.API.STREAM.PURGE.${l.snapshotStream}`, l.subject, ...snapshotSubjects(l)]),
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

const any = '*';

/** Every process, whatever its roles: presence, the registry cache. */
const everyProcess: Declaration = {
  // Each role announces itself on its own heartbeat subject (permissionsOf adds it).
  hears: [processSubjects.heartbeats, registryEvents.changes, registryEvents.heartbeat],
  serves: [processSubjects.describe],
  calls: [registry.snapshot],
};

/** The registry's operator endpoints: users, apps, providers, re-sealing (the admin role alone calls them). */
const registryAdmin: Subject[] = [
  registry.userAdd,
  registry.userToken,
  registry.userRevoke,
  registry.userList,
  registry.appInstall,
  registry.appList,
  registry.appUninstall,
  registry.providerList,
  registry.providerSetState,
  registry.appReseal,
];

const declarations: Record<BusRole, Declaration> = {
  // The browser- and app-facing listeners. No admin subject, no app secret, no registry write.
  edge: {
    calls: [
      token.issue,
      provider.call,
      provider.authorize,
      vault.op,
      vault.authorize,
      upload.create,
      upload.get,
      upload.begin,
      uploadSubjects.session(any, any),
      registry.appVerify,
      // The gateway: events to callback replicas; the local API's commands to the edges holding connections.
      gatewaySubjects.deliver(any),
      gatewaySubjects.hello(any),
      gatewaySubjects.edge(any),
      gatewaySubjects.user(any, any),
      gatewaySubjects.list,
      // Pulling a provider's large answer.
      streamSubject('provider', '>'),
    ],
    serves: [gatewaySubjects.edge(any), gatewaySubjects.user(any, any), gatewaySubjects.list, gatewaySubjects.settled(any), streamSubject('edge', '>')],
  },
  // The operator's listener (loopback): users, apps, providers, the vault's audit and key rotation.
  admin: { calls: [...registryAdmin, upload.prepare, vault.audit, vault.rotate, vault.operator, processSubjects.describe, ...Object.values(stateEndpoints)] },
  registry: {
    serves: [...registryAdmin, registry.appCredentials, registry.appVerify, registry.snapshot, stateEndpoints.registryExport, stateEndpoints.registryImport, stateEndpoints.registryEmpty],
    emits: [registryEvents.changes, registryEvents.heartbeat],
    jetstream: { streams: [], buckets: [], subjects: [], logs: [registryState] },
  },
  // Hashes with app secrets (bcrypt proofs): one of the two roles that may obtain them.
  token: { serves: [token.issue], calls: [registry.appCredentials], jetstream: { streams: [tokenState.stream], buckets: [], subjects: [tokenState.subject] } },
  provider: { serves: [provider.call, provider.authorize, streamSubject('provider', '>')], calls: [streamSubject('edge', '>')] },
  vault: {
    serves: [vault.op, vault.authorize, vault.audit, vault.rotate, vault.operator, stateEndpoints.vaultExport, stateEndpoints.vaultImport, stateEndpoints.vaultEmpty],
    emits: [vaultEvents.written],
    hears: [vaultEvents.written],
    jetstream: { streams: [vaultState.auditStream], buckets: [vaultState.keys, vaultState.secrets], subjects: [vaultState.auditSubject] },
  },
  // Signs callbacks with app secrets: the other role that may obtain them.
  callback: { serves: [gatewaySubjects.deliver(any), gatewaySubjects.hello(any), uploadNotices.deliver], calls: [registry.appCredentials], emits: [gatewaySubjects.settled(any)] },
  upload: {
    serves: [upload.create, upload.get, upload.begin, upload.prepare, uploadSubjects.session(any, any)],
    emits: [uploadEvents.completed],
    calls: [uploadNotices.deliver],
    jetstream: { streams: [], buckets: [], subjects: [], logs: [uploadState] },
  },
};

/** Published for parties outside Pier, or captured by a JetStream stream: nobody in Pier subscribes to them. */
export const EXTERNAL_EVENTS: readonly string[] = [
  uploadEvents.completed.subject,
  vaultState.auditSubject,
  tokenState.subject,
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

/** The roles that keep state on JetStream (PIER_STATE=jetstream), each in its own NATS account. */
export const STATE_ROLES = BUS_ROLES.filter((r) => declarations[r].jetstream !== undefined);
export type StateRole = (typeof STATE_ROLES)[number];

/** The NATS account holding `role`'s JetStream state (`pier bus init` writes one per state role). */
export const stateAccountOf = (role: BusRole) => `PIER_STATE_${role.toUpperCase()}`;

/**
 * The rights of a role's state identity inside its own state account: its streams, buckets and
 * subjects, and its inbox. Whatever JetStream does with them stays inside that account, where no
 * Pier service listens and no other role's traffic passes; the allow-lists only keep the role's
 * own code from reaching beyond its streams by mistake.
 */
export function statePermissionsFor(role: BusRole, inboxPrefix: string): RolePermissions {
  const js = declarations[role].jetstream;
  if (!js) throw new Error(`role ${role} keeps no state on JetStream`);
  return { publish: [...new Set(jetStreamSubjects(js))].sort(), subscribe: [`${inboxPrefix}.>`] };
}

/**
 * The allow-lists of a process running `roles` (the union of theirs and every process's), with
 * the inbox prefix its replies arrive on.
 */
export function permissionsFor(roles: readonly BusRole[], inboxPrefix: string): RolePermissions {
  const parts = [everyProcess, ...roles.map((r) => withHeartbeat(r, declarations[r]))].map(permissionsOf);
  const unique = (xs: string[]) => [...new Set(xs)].sort();
  return {
    publish: unique(parts.flatMap((p) => p.publish)),
    subscribe: unique([...parts.flatMap((p) => p.subscribe), `${inboxPrefix}.>`]),
  };
}

/** A role announces its replicas on its own heartbeat subject, which no other role may publish. */
const withHeartbeat = (role: BusRole, d: Declaration): Declaration => ({ ...d, emits: [...(d.emits ?? []), processSubjects.heartbeat(role)] });

/** One role's own declaration, without what every process has (for docs and tests). */
export function declaredBy(role: BusRole): RolePermissions {
  return permissionsOf(withHeartbeat(role, declarations[role]));
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
  return (subject) => {
    const s = subject.split('.');
    return patterns.some((p) => coversSplit(p, s));
  };
}

function coversSplit(p: readonly string[], s: readonly string[]): boolean {
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (s[i] === '>') return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}
