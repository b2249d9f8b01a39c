import { tell } from '../../bus/verbs.js';
import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { PierError } from '../../bus/errors.js';
import { appId } from '../../bus/ids.js';
import { uploadEvents, type BeginWrite, type WriteSession as WriteSessionReply } from '../../bus/subjects.js';
import { defineActor } from '../../lib/runtime/actor.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { removeUpload } from './finish.js';
import { uploadDeclaration } from './declaration.js';
import type { UploadDeps } from './deps.js';
import { createUpload, getUpload, lockForWrite } from './handler.js';
import { UploadLocks } from './lock.js';
import { CompletedNotifier } from './notify.js';
import { UploadRoot } from './root.js';
import { WriteSession } from './session.js';
import { createTusUpload, describeTusUpload, terminateTusUpload } from './tus.js';
import { storageIdOf } from './storage-id.js';
import { LmdbUploadStore, type UploadStore } from './store.js';
import { JetStreamUploadStore } from './store-jetstream.js';
import { recover, sweep } from './upkeep.js';
import { walkDown } from './walk.js';
import { mkdirDurable } from '../../lib/state/durable-files.js';

const LEASE_MS = 15_000;
/** How long a request waits for a PATCH in progress to settle: below the 5 s deadline of the bus requests that wait, so the caller hears 409, not 504. */
const SETTLE_WAIT_MS = 4_000;
/** How long a write session waits for its next piece before it ends (keeping what was confirmed). */
const SESSION_IDLE_MS = 10_000;

/** LMDB under the data dir (replicas on one host share it), or the replicated log on JetStream. */
async function openUploadStore(ctx: RoleContext, root: UploadRoot): Promise<UploadStore> {
  const { state } = ctx.config;
  if (state.kind === 'lmdb') return LmdbUploadStore.open(join(ctx.config.dataDir, 'uploads'));
  if (!ctx.jetstream) throw new Error('PIER_STATE=jetstream needs NATS_URL');
  const storage = await storageIdOf(root.root);
  const onError = (err: unknown, what: string) => ctx.log.error({ err }, `upload records: ${what} failed`);
  return JetStreamUploadStore.open(ctx.jetstream.js, ctx.jetstream.manager, { replicas: state.replicas, storage, onError });
}

interface UploadActor {
  ctx: RoleContext;
  deps: UploadDeps;
  bytes: Counter;
  failed: Counter;
  stopWatchingPeers: () => void;
}

async function onStart(ctx: RoleContext): Promise<UploadActor> {
  // The root is taken as its real path once: the boundary walks start below it (walk.ts).
  // Made durable (each new folder synced into its parent): its storage id and files live in it.
  mkdirDurable(ctx.config.upload.root, 0o755);
  const root = new UploadRoot(await realpath(ctx.config.upload.root));
  const store = await openUploadStore(ctx, root);
  const registers = [ctx.metrics.registry];
  const completed = new Counter({ name: 'pier_uploads_completed_total', help: 'Uploads completed', registers });
  const active: Gauge = new Gauge({
    name: 'pier_uploads_active',
    help: 'Unfinished uploads',
    registers,
    collect: () => active.set(store.all().filter((u) => u.state === 'active').length),
  });
  const notifier = new CompletedNotifier({ bus: ctx.bus, cache: ctx.cache, log: ctx.log });
  const startedAt = Date.now();
  const locks = new UploadLocks({
    store,
    busId: ctx.peers.self.busId,
    now: ctx.now,
    leaseMs: LEASE_MS,
    settleWaitMs: SETTLE_WAIT_MS,
    // On the in-process bus there is no other replica; on NATS, others are trusted as alive until
    // heartbeats had time to come.
    replicaAlive: (busId) => ctx.bus.kind !== 'memory' && (ctx.peers.alive('upload').some((p) => p.busId === busId) || Date.now() - startedAt < 3 * ctx.config.heartbeatMs),
    announce: (id) => tell(ctx.bus, uploadEvents.released, { id }),
  });
  const deps: UploadDeps = {
    store,
    cache: ctx.cache,
    root,
    busId: ctx.peers.self.busId,
    now: ctx.now,
    chunkMaxBytes: ctx.config.upload.chunkBytes,
    maxUnfinished: ctx.config.upload.maxUnfinished,
    locks,
    completed: (ev, id) => {
      completed.inc();
      tell(ctx.bus, uploadEvents.completed, ev);
      notifier.notify({ eventId: `upload:${id}`, ...ev });
    },
  };
  await recover(deps);
  // A replica known dead holds no lock: whoever waits on one of its locks looks again, and what it
  // left half done is repaired now (a whole upload whose publication it was cut in is published),
  // not only when some replica starts. Replicas race for each upload's lock: one repairs it.
  const stopWatchingPeers = ctx.peers.onDeath((peer) => {
    if (!peer.roles.includes('upload')) return;
    locks.wakeAll();
    recover(deps).catch((err: unknown) => ctx.log.warn({ err }, 'upload repair after a replica died failed'));
  });
  ctx.counters.set('uploads', () => store.all().filter((u) => u.state === 'active').length);
  ctx.log.info({ chunkBytes: deps.chunkMaxBytes }, 'upload actor started');
  return {
    ctx,
    deps,
    bytes: new Counter({ name: 'pier_upload_bytes_total', help: 'Bytes written to uploads', registers }),
    failed: new Counter({ name: 'pier_upload_patches_failed_total', help: 'PATCHes refused or failed', registers }),
    stopWatchingPeers,
  };
}

/** Locks the upload for one PATCH and opens its write session. */
async function beginWrite(a: UploadActor, req: BeginWrite): Promise<WriteSessionReply> {
  const lease = await lockForWrite(a.deps, req);
  try {
    const u = lease.upload;
    const deps = { ...a.deps, bus: a.ctx.bus, idleMs: SESSION_IDLE_MS, wrote: (n: number) => a.bytes.inc(n), failed: () => a.failed.inc() };
    // A tus PATCH may carry the rest of the upload (tus clients send a file in one PATCH by
    // default); it is streamed like any chunk, so memory does not grow with it.
    const maxBytes = u.protocol === 'tus' ? u.fileSize - u.offset : Math.min(a.deps.chunkMaxBytes, u.fileSize - u.offset);
    const s = new WriteSession(deps, lease, maxBytes, req.offset !== null && req.provisional !== true);
    await s.start();
    return { subject: s.subject, offset: u.offset, maxBytes: s.maxBytes };
  } catch (err) {
    lease.end(); // the session never opened: its lock is dead with it
    throw err;
  }
}

/** Unfinished uploads, newest first, at most `limit`. */
async function listInProgress(deps: UploadDeps, limit: number) {
  const active = (await deps.store.read((r) => r.all())).filter((u) => u.state === 'active').sort((a, b) => b.updatedAt - a.updatedAt);
  const uploads = active.slice(0, limit).map((u) => ({
    id: u.id,
    user: u.user,
    app: u.app,
    path: deps.root.appPath(u.user, u.target),
    offset: u.offset,
    size: u.lengthDeferred ? null : u.fileSize,
    protocol: u.protocol === 'tus' ? ('tus' as const) : ('upload' as const),
    writing: u.lock !== null && deps.locks.alive(u.lock),
    updatedAt: u.updatedAt,
  }));
  return { uploads, truncated: active.length > limit };
}

/** Made one folder at a time from the user's folder, never through a link (walk.ts). */
async function prepareDest(a: UploadActor, user: string, dest: string): Promise<{ dir: string }> {
  const { root } = a.deps;
  const dir = root.hostPath(user, dest);
  await walkDown(root.userFolder(user), dir, { create: true, refused: () => new PierError('BAD_REQUEST', 'upload.dest: must lead through folders of the user, without links') });
  return { dir };
}

/**
 * The upload actor (queue group `upload`): the only code that writes uploaded files. It runs on
 * the host that has the storage; replicas there share the LMDB environment of upload records.
 */
export const uploadActor = defineActor(uploadDeclaration, {
  serves: {
    create: (a: UploadActor, req) => (req.protocol === 'tus' ? createTusUpload(a.deps, req, a.ctx.config.upload.idleMs) : createUpload(a.deps, req)),
    get: (a: UploadActor, req) => getUpload(a.deps, req.user, req.app, req.id),
    prepare: (a: UploadActor, req) => prepareDest(a, req.user, req.dest),
    begin: beginWrite,
    describe: (a: UploadActor, req) => describeTusUpload(a.deps, req.user, req.app, req.id, a.ctx.config.upload.idleMs),
    list: (a: UploadActor, req) => listInProgress(a.deps, req.limit),
    terminate: (a: UploadActor, req) => terminateTusUpload(a.deps, req.user, req.app, req.id),
  },
  hears: {
    released: (a: UploadActor, { id }) => a.deps.locks.wake(id),
  },
  timers: {
    // On NATS, locks of replicas that died with this one are known dead once heartbeats had time to
    // come; so are replicas trusted alive meanwhile.
    lateRecovery: {
      once: true,
      everyMs: (ctx) => 4 * ctx.config.heartbeatMs,
      run: async (a) => {
        a.deps.locks.wakeAll();
        await recover(a.deps);
      },
    },
    sweep: { everyMs: (ctx) => Math.min(3_600_000, Math.max(1_000, Math.floor(ctx.config.upload.idleMs / 4))), run: (a) => sweep(a.deps, a.ctx.config.upload.idleMs) },
  },
  // Uninstalling an app cancels its unfinished uploads.
  onRegistryChange: (a, c) => {
    if (c.kind !== 'app' || c.op !== 'delete') return;
    for (const u of a.deps.store.all()) {
      if (u.state === 'active' && appId(u.user, u.app) === c.key) void removeUpload(a.deps.store, u);
    }
  },
  onStart,
  onStop: async (a) => {
    a.stopWatchingPeers();
    await a.deps.store.close();
  },
});
