import { exchange } from './exchange.js';
import type { AuditEntry } from './subjects-vault.js';
import type { ProviderView, TokenView, UserView } from './subjects-registry-events.js';

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
  registryExport: exchange<{ offset: number; limit: number }, StatePage>({ subject: 'pier.registry.state.export', queue: 'registry', request: page, timeoutMs: 30_000, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  registryImport: exchange<{ records: StateRecord[] }, { imported: number }>({ subject: 'pier.registry.state.import', queue: 'registry', request: batch, timeoutMs: 30_000, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  vaultExport: exchange<{ offset: number; limit: number }, StatePage>({ subject: 'pier.vault.state.export', queue: 'vault', request: page, timeoutMs: 30_000, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
  vaultImport: exchange<{ records: StateRecord[] }, { imported: number }>({ subject: 'pier.vault.state.import', queue: 'vault', request: batch, timeoutMs: 30_000, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
  /** Whether the registry and the vault hold anything yet (an import goes into empty stores only). */
  registryEmpty: exchange<Record<string, never>, { empty: boolean }>({ subject: 'pier.registry.state.empty', queue: 'registry', request: {}, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  vaultEmpty: exchange<Record<string, never>, { empty: boolean }>({ subject: 'pier.vault.state.empty', queue: 'vault', request: {}, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
};
