import { join } from 'node:path';
import { Counter } from 'prom-client';
import { onEvent, publishEvent, serve } from '../../bus/rpc.js';
import { stateEndpoints, vault, vaultEvents, type AppView, type AuditEntry } from '../../bus/subjects.js';
import { vaultExportPage, vaultImportBatch } from './state-io.js';
import { operatorOp } from './operator.js';
import { checkStoreKey } from '../../lib/master-key-check.js';
import { AccessTokens } from '../../lib/access-token.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import { DataKeys } from './data-keys.js';
import { vaultGate, vaultOp, type VaultDeps } from './handler.js';
import { LmdbVaultStore, type VaultStore } from './store.js';
import { JetStreamVaultStore } from './store-jetstream.js';

/** Workspaces an app's manifest grants on this vault (from `<Op>?workspace=<ws>` ops). */
function workspacesOf(app: AppView, group: string): Set<string> {
  const out = new Set<string>();
  for (const g of app.grants) {
    if (g.dataType !== 'secret' || g.group !== group) continue;
    for (const op of g.ops) out.add(op.slice(op.indexOf('=') + 1));
  }
  return out;
}

/** LMDB under the data dir (replicas on one host share it), or JetStream (replicas anywhere). */
async function openVaultStore(ctx: RoleContext): Promise<VaultStore> {
  // (On JetStream, replicas tell each other where a durable change is, so reads need not ask the stream.)
  const { state, audit } = ctx.config;
  if (state.kind === 'lmdb') return LmdbVaultStore.open(join(ctx.config.dataDir, 'vault'), ctx.config.instanceId);
  if (!ctx.jetstream) throw new Error('PIER_STATE=jetstream needs NATS_URL');
  const lost = new Counter({ name: 'pier_vault_audit_lost_total', help: 'Audit entries of durable vault changes that could not be appended to the audit stream', registers: [ctx.metrics.registry] });
  return JetStreamVaultStore.open(ctx.jetstream.js, ctx.jetstream.manager, {
    replicas: state.replicas,
    auditMaxAgeMs: audit.maxAgeMs,
    auditMaxEntries: audit.maxEntries,
    announce: (mark) => publishEvent(ctx.bus, vaultEvents.written, mark),
    onAuditLost: (count) => {
      lost.inc(count);
      ctx.log.error({ count }, 'vault: audit entries of a durable change could not be appended');
    },
  });
}

/**
 * The vault actor (queue group `vault`): the only code that touches secrets. Values are sealed
 * with per-(user, workspace, env) data keys, themselves wrapped by the master key.
 */
export async function startVault(ctx: RoleContext): Promise<Running> {
  const store = await openVaultStore(ctx);
  try {
    checkStoreKey(ctx.config.keyring, 'vault', store.everything().dataKeys.map((d) => ({ what: `data key ${d.scope}`, value: d.record.wrapped })));
  } catch (err) {
    await store.close();
    throw err;
  }
  const written = store instanceof JetStreamVaultStore ? onEvent(ctx.bus, vaultEvents.written, (mark) => store.heard(mark)) : null;
  const keys = new DataKeys(store, ctx.config.keyring, () => new Date(ctx.now()));
  const group = `secret.${ctx.config.vaultName}`;
  // Reads and refusals are audited in batches (one LMDB transaction per 20 ms or 256 entries):
  // a write transaction per read would cost reads about 15 %. A crash loses at most that batch.
  let pending: AuditEntry[] = [];
  let flushTimer: NodeJS.Timeout | null = null;
  const flushAudit = (): Promise<unknown> => {
    if (flushTimer) clearTimeout(flushTimer);
    flushTimer = null;
    const batch = pending;
    pending = [];
    return store.appendAudit(batch);
  };
  const anonymous = new Counter({ name: 'pier_vault_anonymous_refusals_total', help: 'Vault requests refused before any app was authenticated (counted, not audited)', labelNames: ['op', 'outcome'], registers: [ctx.metrics.registry] });
  const outcomes = new Counter({ name: 'pier_vault_operations_total', help: 'Vault operations by op and outcome', labelNames: ['op', 'outcome'], registers: [ctx.metrics.registry] });
  const deps: VaultDeps = {
    store,
    keys,
    cache: ctx.cache,
    tokens: new AccessTokens(ctx.config.keyring),
    vaultGroup: group,
    now: ctx.now,
    audit: (entry) => {
      outcomes.inc({ op: entry.op, outcome: entry.outcome });
      pending.push(entry);
      if (pending.length >= 256) void flushAudit();
      else flushTimer ??= setTimeout(() => void flushAudit(), 20);
    },
    anonymous: (op, outcome) => anonymous.inc({ op, outcome }),
    auditInWrite: (w, entry) => {
      outcomes.inc({ op: entry.op, outcome: entry.outcome });
      w.appendAudit(entry);
    },
  };

  // `pier app uninstall --purge`: the app's workspaces go, unless another app of the user still uses them.
  const stopPurging = ctx.cache.onApplied((change) => {
    if (change.kind !== 'app' || change.op !== 'delete' || !change.purge) return;
    const removed = change.value;
    const stillUsed = new Set(ctx.cache.appsOf(removed.user).flatMap((a) => [...workspacesOf(a, group)]));
    const doomed = [...workspacesOf(removed, group)].filter((ws) => !stillUsed.has(ws));
    void store.write((w) => {
      for (const ws of doomed) {
        for (const scope of w.scopesOf(removed.user, ws)) {
          for (const { key } of w.listScope(scope)) w.removeSecret(key);
          keys.remove(scope, w);
        }
        deps.auditInWrite(w, { at: new Date(ctx.now()).toISOString(), user: removed.user, app: removed.name, op: 'Purge', workspace: ws, env: null, name: null, outcome: 'ok' });
      }
    });
  });

  const hooks = { observe: ctx.metrics.observeActor };
  const subs = [
    serve(ctx.bus, vault.op, (req) => vaultOp(deps, req), hooks),
    serve(ctx.bus, vault.authorize, (req) => vaultGate(deps, req), hooks),
    serve(ctx.bus, vault.operator, (req) => operatorOp(deps, req), hooks),
    serve(
      ctx.bus,
      vault.audit,
      async (req) => {
        await flushAudit(); // what this replica has batched is part of the answer
        return store.readAudit(req.limit, req.user);
      },
      hooks,
    ),
    serve(ctx.bus, vault.rotate, async () => ({ rewrapped: await keys.rewrapAll() }), hooks),
    serve(ctx.bus, stateEndpoints.vaultExport, async (r) => (await store.sync(), vaultExportPage(store, r.offset, r.limit)), hooks),
    serve(ctx.bus, stateEndpoints.vaultImport, (r) => vaultImportBatch(store, r.records, ctx.config.keyring), hooks),
    serve(ctx.bus, stateEndpoints.vaultEmpty, async () => (await store.sync(), { empty: store.everything().dataKeys.length === 0 }), hooks),
  ];
  // Retention, at start and hourly: replicas on one environment may prune together, harmlessly.
  const prune = () =>
    store
      .pruneAudit(ctx.now() - ctx.config.audit.maxAgeMs, ctx.config.audit.maxEntries)
      .then((n) => n > 0 && ctx.log.info({ removed: n }, 'audit entries past retention removed'))
      .catch((err: unknown) => ctx.log.error({ err }, 'audit retention failed'));
  await prune();
  const pruner = setInterval(() => void prune(), 3_600_000);
  ctx.log.info({ group }, 'vault actor started');
  return {
    async stop() {
      for (const s of subs) s.unsubscribe();
      written?.unsubscribe();
      clearInterval(pruner);
      stopPurging();
      await flushAudit();
      await store.close();
    },
  };
}
