import { callbackActor } from '../actors/callback/index.js';
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
 * What each role may do on the bus, from the one place each is declared: an actor's `defineActor`
 * table, the edge's and the admin listener's `edge/bus-roles.ts`. Nothing else lists subjects.
 */
export const ROLE_TABLE: RoleTable = {
  edge: edgeRole,
  admin: adminRole,
  ...(Object.fromEntries(ACTORS.map((a) => [a.role, busDeclarationOf(a)])) as Record<Exclude<BusRole, 'edge' | 'admin'>, permissions.Declaration>),
};

/** The allow-lists of a process running `roles` (bus/permissions.ts). */
export const permissionsFor = (roles: readonly BusRole[], inboxPrefix: string): RolePermissions => permissions.permissionsFor(ROLE_TABLE, roles, inboxPrefix);

/** The rights of a role's state login inside its own state account. */
export const statePermissionsFor = (role: BusRole, inboxPrefix: string): RolePermissions => permissions.statePermissionsFor(ROLE_TABLE, role, inboxPrefix);

/** One role's own declaration, without what every process has (for docs and tests). */
export const declaredBy = (role: BusRole): RolePermissions => permissions.declaredBy(ROLE_TABLE, role);
