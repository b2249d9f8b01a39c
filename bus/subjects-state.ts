import { endpoint } from './exchange.js';
import type { AuditEntry } from './subjects-vault.js';
import type { ProviderView, TokenView, UserView } from './subjects-registry.js';

/**
 * One record of `pier state export` (docs/operations.md "How writes stay correct"): everything the registry and the vault
 * keep, secrets sealed as they are at rest (the master key is never part of it). Binary fields
 * travel as bytes on the bus and as base64 in the file.
 */
export type StateRecord =
  | { kind: 'user'; value: UserView }
  | { kind: 'token'; value: TokenView }
  | { kind: 'app'; value: Record<string, unknown> }
  | { kind: 'provider'; value: ProviderView }
  | { kind: 'dataKey'; key: string; value: Record<string, unknown> }
  | { kind: 'secret'; key: string; value: Record<string, unknown> }
  /** A kept version and a deleted secret (0.3; a file without them imports as before). */
  | { kind: 'version'; key: string; value: Record<string, unknown> }
  | { kind: 'deleted'; key: string; value: Record<string, unknown> }
  /** A value key, wrapped by its scope's data key (0.3: docs/vault.md "Destroyed"), by its id. */
  | { kind: 'valueKey'; key: string; value: Record<string, unknown> }
  | { kind: 'audit'; value: AuditEntry };

/** Every kind of record a state file holds. */
export const STATE_KINDS = ['user', 'token', 'app', 'provider', 'dataKey', 'valueKey', 'secret', 'version', 'deleted', 'audit'] as const;

export interface StatePage {
  records: StateRecord[];
  done: boolean;
}

const page = { offset: { type: 'number', integer: true, min: 0 }, limit: { type: 'number', integer: true, min: 1, max: 1_000 } } as const;
const batch = { records: { type: 'array', max: 5_000, items: { type: 'object', props: { kind: { type: 'enum', values: [...STATE_KINDS] } } } } } as const;

/** Export in pages (a bus message stays far below NATS's max payload), import in batches. */
export const stateEndpoints = {
  registryExport: endpoint<{ offset: number; limit: number }, StatePage>('pier.registry.state.export', 'registry', page, 30_000, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  registryImport: endpoint<{ records: StateRecord[] }, { imported: number }>('pier.registry.state.import', 'registry', batch, 30_000, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  vaultExport: endpoint<{ offset: number; limit: number }, StatePage>('pier.vault.state.export', 'vault', page, 30_000, { request: 'vault', from: 'admin', reply: true, grant: 'vault' }),
  vaultImport: endpoint<{ records: StateRecord[] }, { imported: number }>('pier.vault.state.import', 'vault', batch, 30_000, { request: 'vault', from: 'admin', reply: true, grant: 'vault' }),
  /** Whether the registry and the vault hold anything yet (an import goes into empty stores only). */
  registryEmpty: endpoint<Record<string, never>, { empty: boolean }>('pier.registry.state.empty', 'registry', {}, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  vaultEmpty: endpoint<Record<string, never>, { empty: boolean }>('pier.vault.state.empty', 'vault', {}, undefined, { request: 'vault', from: 'admin', reply: true, grant: 'vault' }),
};
