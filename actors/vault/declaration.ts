import { stateEndpoints, vault, vaultEvents, vaultState } from '../../bus/subjects.js';
import { declareActor } from '../../lib/runtime/actor-declaration.js';

/**
 * The vault actor on the bus (queue group `vault`), its role's rights; its implementation is
 * index.ts, loaded only where the role runs.
 */
export const vaultDeclaration = declareActor({
  role: 'vault',
  serves: {
    op: vault.op,
    authorize: vault.authorize,
    operator: vault.operator,
    // Wire format 2's operations, on their own subject: only replicas of a release that has them subscribe (docs/operations.md "Upgrading").
    versions: vault.versions,
    audit: vault.audit,
    // Wire format 3's operation, on its own subject (only replicas of this release subscribe).
    rekey: vault.rekey,
    rotate: vault.rotate,
    // On JetStream, where each writer's durable changes are (reads wait for their views to reach
    // them): taken in and answered before the write is (index.ts announce).
    written: vaultEvents.written,
    export: stateEndpoints.vaultExport,
    import: stateEndpoints.vaultImport,
    empty: stateEndpoints.vaultEmpty,
  },
  calls: [vaultEvents.written],
  jetstream: {
    streams: [vaultState.auditStream],
    buckets: [vaultState.keys, vaultState.secrets, vaultState.versions, vaultState.deleted, vaultState.valueKeys],
    // A destroyed version's bytes are erased from its stream, not only left out of it (docs/vault.md "Versions"),
    // and a purged workspace's data keys with the rest (docs/vault.md "Purge").
    // A value key's message goes with the last value sealed under it (docs/vault.md "Destroyed").
    erases: [`KV_${vaultState.versions}`, `KV_${vaultState.deleted}`, `KV_${vaultState.secrets}`, `KV_${vaultState.keys}`, `KV_${vaultState.valueKeys}`],
    subjects: [vaultState.auditSubject],
  },
});
