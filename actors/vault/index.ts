import { gather, tell } from '../../bus/verbs.js';
import type { Exchange } from '../../bus/exchange.js';
import { join } from 'node:path';
import { Counter } from 'prom-client';
import { vaultEvents, type WrittenMark } from '../../bus/subjects.js';
import { defineActor } from '../../lib/runtime/actor.js';
import { AccessTokens } from '../../lib/crypto/access-token.js';
import { checkStoreKey } from '../../lib/crypto/master-key-check.js';
import { pairCounter, Tallies } from '../../lib/runtime/metric-tally.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { AuditBatch } from './audit-batch.js';
import { DataKeys } from './data-keys.js';
import { vaultDeclaration } from './declaration.js';
import { Values, VALUE_KEYS_WIRE } from './values.js';
import { strayValueKeys } from './value-key-erasure.js';
import { vaultGate, vaultOp, type VaultDeps } from './handler.js';
import { operatorOp } from './operator.js';
import { rekey } from './rekey.js';
import { finishPurges, purgeWorkspaces } from './purge.js';
import { destroyGeneration } from './versions-deleted.js';
import { expiredDeleted, isOrphan, orphanVersions } from './versions-read.js';
import { vaultExportPage, vaultImportBatch } from './state-io.js';
import type { VaultStore } from './store.js';
import { LmdbVaultStore } from './store-lmdb.js';
import { JetStreamVaultStore } from './store-jetstream.js';

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
    announce: (mark) => announce(ctx, mark),
    // Announcements come over the bus connection: one lost there makes the next read check the streams.
    connectionLosses: () => ctx.bus.connectionLosses(),
    onAuditLost: (count) => {
      lost.inc(count);
      ctx.log.error({ count }, 'vault: audit entries of a durable change could not be appended');
    },
    onEraseFailed: (err) => ctx.log.error({ err }, 'vault: a removed record could not be erased from its stream (the hourly sweep tries again)'),
    onPutBackFailed: (err) => ctx.log.error({ err }, 'vault: a write that lost to another could not put back what it had committed (answered 503): read the secret and its versions'),
  });
}

/** The longest a write waits for the vault replicas to take its mark in (a paused or dying one is not waited for longer). */
const MARK_WAIT_MS = 500;
/** Answers waited for at most (the role's heartbeats are bounded too; a thief of its identity faking more replicas waits no longer). */
const MARK_ANSWERS_MAX = 16;

/**
 * Tells every vault replica where a write just made durable is and, when another of this release
 * runs, waits until they have taken it in (this one answers too: every replica hears the subject),
 * before the write is answered (docs/operations.md "How writes stay correct"): a read any of them
 * serves after the answer waits for its view to show the write. Alone (or beside 0.3.0 replicas,
 * which hear it as their one-way message and answer nothing) it only says it: nobody to wait for.
 */
async function announce(ctx: RoleContext, mark: WrittenMark): Promise<void> {
  const others = ctx.peers.alive('vault').filter((p) => p.busId !== ctx.peers.self.busId && (p.wire?.speaks ?? 1) >= VALUE_KEYS_WIRE).length;
  // Said without a reply subject, as 0.3.0 says it: the replicas take it in all the same (unanswered).
  if (others === 0) return tell(ctx.bus, vaultEvents.written as unknown as Exchange<WrittenMark, never>, mark);
  await gather(ctx.bus, vaultEvents.written, mark, { timeoutMs: MARK_WAIT_MS, stallMs: MARK_WAIT_MS, expected: Math.min(others + 1, MARK_ANSWERS_MAX) });
}

interface VaultActor {
  ctx: RoleContext;
  store: VaultStore;
  keys: DataKeys;
  deps: VaultDeps;
  batch: AuditBatch;
  /** The first sweep of deleted secrets and earlier records, soon after the start (then hourly). */
  firstSweep: NodeJS.Timeout | null;
  /** The sweep running now (one at a time). */
  sweeping: Promise<void> | null;
  /** Set by a stop: a sweep cut short by the store closing under it is not an error. */
  stopped: boolean;
}

async function onStart(ctx: RoleContext): Promise<VaultActor> {
  const began = Date.now();
  const store = await openVaultStore(ctx);
  const openMs = Date.now() - began;
  try {
    checkStoreKey(ctx.config.keyring, 'vault', store.everything().dataKeys.map((d) => ({ what: `data key ${d.scope}`, value: d.record.wrapped })));
  } catch (err) {
    await store.close();
    throw err;
  }
  const keys = new DataKeys(store, ctx.config.keyring, () => new Date(ctx.now()));
  const batch = new AuditBatch((entries, prepared) => store.appendAudit(entries, prepared), store.prepareAudit?.bind(store));
  const registers = [ctx.metrics.registry];
  const anonymous = new Counter({ name: 'pier_vault_anonymous_refusals_total', help: 'Vault requests refused before any app was authenticated (counted, not audited)', labelNames: ['op', 'outcome'], registers });
  // Counted in plain numbers, handed to prom-client when it is scraped (a series per op and outcome).
  const tallies = new Tallies();
  const outcomes = pairCounter(tallies, new Counter({ name: 'pier_vault_operations_total', help: 'Vault operations by op and outcome', labelNames: ['op', 'outcome'], registers, collect: tallies.collect }), 'op', 'outcome');
  const deps: VaultDeps = {
    store,
    keys,
    values: new Values(store, keys, sealingGate(ctx), { onKeysFailed: (err) => ctx.log.warn({ err }, 'vault: value keys could not be reserved ahead; writes meanwhile commit their own') }),
    cache: ctx.cache,
    tokens: new AccessTokens(ctx.config.keyring),
    vaultGroup: `secret.${ctx.config.vaultName}`,
    now: ctx.now,
    audit: (entry) => {
      outcomes(entry.op, entry.outcome);
      batch.add(entry);
    },
    anonymous: (op, outcome) => anonymous.inc({ op, outcome }),
    auditInWrite: (w, entry) => {
      outcomes(entry.op, entry.outcome);
      w.appendAudit(entry);
    },
    bounds: ctx.config.vaultVersions,
  };
  const actor: VaultActor = { ctx, store, keys, deps, batch, firstSweep: null, sweeping: null, stopped: false };
  const pruneBegan = Date.now();
  await prune(actor);
  const pruneMs = Date.now() - pruneBegan;
  // Not before serving: on JetStream it reads every secret's history (a request per key), and a
  // replacement replica that starts slower leaves the role without a replica that much longer.
  actor.firstSweep = setTimeout(() => void runSweep(actor), FIRST_SWEEP_MS);
  actor.firstSweep.unref();
  // How long the store took to open and the audit to be pruned: a replacement replica's start is time its role may be away.
  const timings = store instanceof JetStreamVaultStore ? store.openTimings : null;
  ctx.log.info({ group: deps.vaultGroup, openMs, ...(timings ?? {}), pruneMs }, 'vault actor started');
  return actor;
}

/**
 * Whether new values are sealed under value keys of their own (docs/vault.md "Destroyed"): only
 * once every vault replica speaks wire format 3 (the first whose replicas all write them), as the
 * operator's version operations waited for format 2, so that while a replica of the release before
 * runs, nothing is written it would not have written itself. Said once per change.
 */
function sealingGate(ctx: RoleContext): () => boolean {
  let said: boolean | undefined;
  return () => {
    const open = ctx.peers.allSpeak('vault', VALUE_KEYS_WIRE);
    if (open !== said) {
      said = open;
      if (open) ctx.log.info('vault: new values are sealed under value keys of their own (every vault replica speaks wire format 3; docs/vault.md "Destroyed")');
      else ctx.log.info('vault: new values are sealed with their data keys until every vault replica is heard speaking wire format 3 (docs/vault.md "Destroyed"; a replica of an earlier release, or this one just started)');
    }
    return open;
  };
}

/** Audit retention: replicas on one environment may prune together, harmlessly. */
async function prune(a: VaultActor): Promise<void> {
  const { audit } = a.ctx.config;
  const removed = await a.store.pruneAudit(a.ctx.now() - audit.maxAgeMs, audit.maxEntries).catch((err: unknown) => {
    a.ctx.log.error({ err }, 'audit retention failed');
    return 0;
  });
  if (removed > 0) a.ctx.log.info({ removed }, 'audit entries past retention removed');
}

/** Deleted secrets kept past the window, destroyed per write. */
const EXPIRY_BATCH = 100;

/**
 * Deleted secrets past PIER_VAULT_DELETED_DAYS are destroyed (docs/vault.md "Versions"), a batch
 * per write, audited as `(retention)`. Replicas may sweep together: a secret another replica
 * destroyed first is simply not there any more.
 */
async function expireDeleted(a: VaultActor): Promise<void> {
  try {
    await a.store.sync();
    let destroyed = 0;
    for (; !a.stopped; ) {
      const batch = expiredDeleted(a.store, a.deps.bounds, a.ctx.now(), EXPIRY_BATCH);
      if (batch.length === 0) break;
      await a.store.write((w) => {
        for (const { key, gen } of batch) {
          if (w.deleted(key)?.gen !== gen) continue; // undeleted or destroyed meanwhile
          destroyGeneration(w, key, gen);
          const [user, workspace, env, name] = key.split('\u0000');
          a.deps.auditInWrite(w, { at: new Date(a.ctx.now()).toISOString(), user, app: RETENTION_IN_AUDIT, op: 'Destroy', workspace, env, name, outcome: 'ok' });
        }
      });
      destroyed += batch.length;
      if (batch.length < EXPIRY_BATCH) break;
    }
    if (destroyed > 0) a.ctx.log.info({ destroyed }, 'vault: deleted secrets past their window destroyed');
    // Versions left behind by a 0.2 replica's delete (it removes the record alone) go too.
    const orphans = orphanVersions(a.store, 10_000);
    for (let i = 0; i < orphans.length && !a.stopped; i += EXPIRY_BATCH) {
      const batch = orphans.slice(i, i + EXPIRY_BATCH);
      await a.store.write((w) => batch.filter((vkey) => isOrphan(w, vkey)).forEach((vkey) => w.removeVersion(vkey)));
    }
    if (orphans.length > 0) a.ctx.log.info({ removed: orphans.length }, 'vault: versions of secrets deleted by an earlier release removed');
    // Every secret's earlier records (JetStream: the secrets bucket's history) go once old enough:
    // what a destroy, a trim or an expiry took leaves no copy behind there (docs/vault.md "Versions").
    const scrubbed = a.stopped ? 0 : ((await a.store.scrub?.(a.ctx.now() - a.deps.bounds.scrubAfterMs)) ?? 0);
    if (scrubbed > 0) a.ctx.log.info({ erased: scrubbed }, "vault: secrets' earlier records erased from the stream");
  } catch (err) {
    if (!a.stopped) a.ctx.log.error({ err }, 'vault: destroying deleted secrets past their window failed');
  }
}

/** How long after its start a replica first sweeps (then hourly, with the timer). */
const FIRST_SWEEP_MS = 30_000;

/**
 * What a purge or a destroy cut short left (a replica killed between its commits, or before its
 * erasures): records of scopes whose data key went, and removed records' entries still in the
 * streams (docs/vault.md "Purge"). Apart from the expiry, so a failure of one leaves the other done.
 */
async function finishCutShort(a: VaultActor): Promise<void> {
  try {
    const scopes = a.stopped ? 0 : await finishPurges(a.deps, RETENTION_IN_AUDIT);
    if (scopes > 0) a.ctx.log.info({ scopes }, 'vault: purges cut short finished');
    const erased = a.stopped ? 0 : ((await a.store.eraseRemoved?.()) ?? 0);
    if (erased > 0) a.ctx.log.info({ erased }, 'vault: removed records left in the streams erased');
    // Value keys no record names (a write cut short between its commits: value-key-erasure.ts).
    await a.store.syncWithStreams?.();
    const stray = strayValueKeys(a.store, a.ctx.now(), 10_000);
    for (let i = 0; i < stray.length && !a.stopped; i += EXPIRY_BATCH) {
      const batch = stray.slice(i, i + EXPIRY_BATCH);
      await a.store.write((w) => batch.forEach((id) => w.valueKey(id) && w.removeValueKey(id)));
    }
    if (stray.length > 0) a.ctx.log.info({ erased: stray.length }, 'vault: value keys no record names erased');
  } catch (err) {
    if (!a.stopped) a.ctx.log.error({ err }, 'vault: finishing purges and erasures cut short failed');
  }
}

/** One sweep at a time per replica. */
function runSweep(a: VaultActor): Promise<void> {
  a.sweeping ??= expireDeleted(a)
    .then(() => finishCutShort(a))
    .finally(() => (a.sweeping = null));
  return a.sweeping;
}

/** Who the audit log names for what the vault's own retention did. */
const RETENTION_IN_AUDIT = '(retention)';

/** Reads answer what any replica has written so far. */
const current = async <R>(a: VaultActor, read: () => R | Promise<R>): Promise<R> => (await a.store.sync(), read());

/**
 * The vault actor (queue group `vault`): the only code that touches secrets. Values are sealed
 * with per-(user, workspace, env) data keys, themselves wrapped by the master key.
 */
export const vaultActor = defineActor(vaultDeclaration, {
  serves: {
    op: (a: VaultActor, req) => vaultOp(a.deps, req),
    authorize: (a: VaultActor, req) => vaultGate(a.deps, req),
    operator: (a: VaultActor, req) => operatorOp(a.deps, req),
    versions: (a: VaultActor, req) => operatorOp(a.deps, req),
    audit: async (a: VaultActor, req) => {
      await a.batch.flush(); // what this replica has batched is part of the answer
      return a.store.readAudit(req);
    },
    rekey: (a: VaultActor, req) => rekey(a.deps, req),
    rotate: async (a: VaultActor) => ({ rewrapped: await a.keys.rewrapAll() }),
    written: (a: VaultActor, mark) => {
      if (a.store instanceof JetStreamVaultStore) a.store.heard(mark);
      return { heard: true };
    },
    export: (a: VaultActor, r) => current(a, () => vaultExportPage(a.store, r.offset, r.limit)),
    import: (a: VaultActor, r) => vaultImportBatch(a.store, r.records, a.ctx.config.keyring),
    empty: (a: VaultActor) => current(a, () => ({ empty: a.store.everything().dataKeys.length === 0 })),
  },
  timers: { prune: { everyMs: () => 3_600_000, run: prune }, expire: { everyMs: () => 3_600_000, run: runSweep } },
  // `pier app uninstall --purge`: the app's workspaces go, unless another app of the user still uses them.
  onRegistryChange: (a, change) => {
    if (change.kind !== 'app' || change.op !== 'delete' || !change.purge) return;
    void purgeWorkspaces(a.deps, change.value, a.ctx.cache.appsOf(change.value.user)).catch((err: unknown) => a.ctx.log.error({ err }, 'vault: purging an uninstalled app failed'));
  },
  onStart,
  onStop: async (a) => {
    // A sweep is not waited for (it may read every secret's history): it stops at its next step.
    a.stopped = true;
    if (a.firstSweep) clearTimeout(a.firstSweep);
    await a.batch.flush();
    await a.store.close();
  },
});
