import { callbackDeclaration } from '../actors/callback/declaration.js';
import { historyDeclaration } from '../actors/history/declaration.js';
import { providerDeclaration } from '../actors/provider/declaration.js';
import { registryDeclaration } from '../actors/registry/declaration.js';
import { tokenDeclaration } from '../actors/token/declaration.js';
import { uploadDeclaration } from '../actors/upload/declaration.js';
import { vaultDeclaration } from '../actors/vault/declaration.js';
import * as permissions from '../bus/permissions.js';
import type { BusRole, RolePermissions, RoleTable } from '../bus/permissions.js';
import { adminRole, edgeRole } from '../edge/bus-roles.js';
import { lazyActor } from '../lib/runtime/actor.js';
import { busDeclarationOf } from '../lib/runtime/actor-declaration.js';

// Every process reads every role's rights (its own, and its peers' for `pier bus init`), but runs
// only its own roles: an actor's declaration is imported here, its implementation (handlers,
// stores, native modules) only by a process that starts its role (docs/operations.md "Start-up").

/** Every actor, in the order a process starts them (the registry first: the others read it). */
export const ACTORS = [
  lazyActor(registryDeclaration, async () => (await import('../actors/registry/index.js')).registryActor),
  lazyActor(tokenDeclaration, async () => (await import('../actors/token/index.js')).tokenActor),
  lazyActor(providerDeclaration, async () => (await import('../actors/provider/index.js')).providerActor),
  lazyActor(vaultDeclaration, async () => (await import('../actors/vault/index.js')).vaultActor),
  lazyActor(callbackDeclaration, async () => (await import('../actors/callback/index.js')).callbackActor),
  lazyActor(uploadDeclaration, async () => (await import('../actors/upload/index.js')).uploadActor),
] as const;

/**
 * The edge role's own actors, started in edge processes before the edge's listeners (cli/start.ts):
 * the gateway history, which acts with the edge's identity and in its state account.
 */
export const EDGE_ACTORS = [lazyActor(historyDeclaration, async () => (await import('../actors/history/index.js')).historyActor)] as const;

/** Declarations taken together: each list the union of theirs. */
function merged(...ds: permissions.Declaration[]): permissions.Declaration {
  const all = <K extends 'serves' | 'calls' | 'emits' | 'hears'>(k: K) => ds.flatMap((d) => d[k] ?? []);
  // A role has one state account, declared once (the edge's: by its history actor).
  const js = ds.find((d) => d.jetstream !== undefined)?.jetstream;
  return { serves: all('serves'), calls: all('calls'), emits: all('emits'), hears: all('hears'), ...(js ? { jetstream: js } : {}) };
}

/**
 * What each role may do on the bus, from the one place each is declared: an actor's declaration
 * (`actors/<name>/declaration.ts`), the edge's and the admin listener's `edge/bus-roles.ts`. Nothing else lists subjects.
 */
export const ROLE_TABLE: RoleTable = {
  edge: merged(edgeRole, ...EDGE_ACTORS.map((a) => busDeclarationOf(a.declaration))),
  admin: adminRole,
  ...(Object.fromEntries(ACTORS.map((a) => [a.declaration.role, busDeclarationOf(a.declaration)])) as Record<Exclude<BusRole, 'edge' | 'admin'>, permissions.Declaration>),
};

/** The allow-lists of a process running `roles` (bus/permissions.ts). */
export const permissionsFor = (roles: readonly BusRole[], inboxPrefix: string): RolePermissions => permissions.permissionsFor(ROLE_TABLE, roles, inboxPrefix);

/** The rights of a role's state login inside its own state account. */
export const statePermissionsFor = (role: BusRole, inboxPrefix: string): RolePermissions => permissions.statePermissionsFor(ROLE_TABLE, role, inboxPrefix);

/** One role's own declaration, without what every process has (for docs and tests). */
export const declaredBy = (role: BusRole): RolePermissions => permissions.declaredBy(ROLE_TABLE, role);
