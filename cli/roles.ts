import { callbackActor } from '../actors/callback/index.js';
import { historyActor } from '../actors/history/index.js';
import { providerActor } from '../actors/provider/index.js';
import { registryActor } from '../actors/registry/index.js';
import { tokenActor } from '../actors/token/index.js';
import { uploadActor } from '../actors/upload/index.js';
import { vaultActor } from '../actors/vault/index.js';
import * as permissions from '../bus/permissions.js';
import type { BusRole, RolePermissions, RoleTable } from '../bus/permissions.js';
import { adminRole, edgeRole } from '../edge/bus-roles.js';
import { busDeclarationOf, type AnyActor } from '../lib/runtime/actor.js';

/** Every actor, in the order a process starts them (the registry first: the others read it). */
export const ACTORS = [registryActor, tokenActor, providerActor, vaultActor, callbackActor, uploadActor] as const satisfies readonly AnyActor[];

/**
 * The edge role's own actors, started in edge processes before the edge's listeners (cli/start.ts):
 * the gateway history, which acts with the edge's identity and in its state account.
 */
export const EDGE_ACTORS = [historyActor] as const satisfies readonly AnyActor[];

/** Declarations taken together: each list the union of theirs. */
function merged(...ds: permissions.Declaration[]): permissions.Declaration {
  const all = <K extends 'serves' | 'calls' | 'emits' | 'hears'>(k: K) => ds.flatMap((d) => d[k] ?? []);
  // A role has one state account, declared once (the edge's: by its history actor).
  const js = ds.find((d) => d.jetstream !== undefined)?.jetstream;
  return { serves: all('serves'), calls: all('calls'), emits: all('emits'), hears: all('hears'), ...(js ? { jetstream: js } : {}) };
}

/**
 * What each role may do on the bus, from the one place each is declared: an actor's `defineActor`
 * table, the edge's and the admin listener's `edge/bus-roles.ts`. Nothing else lists subjects.
 */
export const ROLE_TABLE: RoleTable = {
  edge: merged(edgeRole, ...EDGE_ACTORS.map(busDeclarationOf)),
  admin: adminRole,
  ...(Object.fromEntries(ACTORS.map((a) => [a.role, busDeclarationOf(a)])) as Record<Exclude<BusRole, 'edge' | 'admin'>, permissions.Declaration>),
};

/** The allow-lists of a process running `roles` (bus/permissions.ts). */
export const permissionsFor = (roles: readonly BusRole[], inboxPrefix: string): RolePermissions => permissions.permissionsFor(ROLE_TABLE, roles, inboxPrefix);

/** The rights of a role's state login inside its own state account. */
export const statePermissionsFor = (role: BusRole, inboxPrefix: string): RolePermissions => permissions.statePermissionsFor(ROLE_TABLE, role, inboxPrefix);

/** One role's own declaration, without what every process has (for docs and tests). */
export const declaredBy = (role: BusRole): RolePermissions => permissions.declaredBy(ROLE_TABLE, role);
