import { randomBytes } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { publishEvent, serve } from '../../bus/rpc.js';
import { upload, uploadEvents, type BeginWrite, type WriteSession as WriteSessionReply } from '../../bus/subjects.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import { createPart, cutBack, partSize, removePart } from './files.js';
import { createUpload, finish, getUpload, lockForWrite, removeUpload, type UploadDeps } from './handler.js';
import { UploadRoot } from './root.js';
import { walkDown } from './walk.js';
import { CompletedNotifier } from './notify.js';
import { PierError } from '../../bus/errors.js';
import { WriteSession } from './session.js';
import { LmdbUploadStore, type Upload, type UploadStore } from './store.js';
import { JetStreamUploadStore } from './store-jetstream.js';
import { storageIdOf } from './storage-id.js';
import { appId } from '../../bus/ids.js';

const LEASE_MS = 15_000;

/** LMDB under the data dir (replicas on one host share it), or the replicated log on JetStream. */
async function openUploadStore(ctx: RoleContext, root: UploadRoot): Promise<UploadStore> {
  const { state } = ctx.config;
  if (state.kind === 'lmdb') return LmdbUploadStore.open(join(ctx.config.dataDir, 'uploads'));
  if (!ctx.jetstream) throw new Error('PIER_STATE=jetstream needs NATS_URL');
  const storage = await storageIdOf(root.root);
  const onError = (err: unknown, what: string) => ctx.log.error({ err }, `upload records: ${what} failed`);
  return JetStreamUploadStore.open(ctx.jetstream.js, ctx.jetstream.manager, { replicas: state.replicas, storage, onError });
}

/**
 * The upload actor (queue group `upload`): the only code that writes uploaded files. It runs on
 * the host that has the storage; replicas there share the LMDB environment of upload records.
 */
export async function startUpload(ctx: RoleContext): Promise<Running> {
  // The root is taken as its real path once: the boundary walks start below it (walk.ts).
  await mkdir(ctx.config.upload.root, { recursive: true });
  const root = new UploadRoot(await realpath(ctx.config.upload.root));
  const store = await openUploadStore(ctx, root);
  const registers = [ctx.metrics.registry];
  const bytes = new Counter({ name: 'pier_upload_bytes_total', help: 'Bytes written to uploads', registers });
  const completed = new Counter({ name: 'pier_uploads_completed_total', help: 'Uploads completed', registers });
  const failed = new Counter({ name: 'pier_upload_patches_failed_total', help: 'PATCHes refused or failed', registers });
  // Write sessions of this replica by id, from before their lock is taken until they end: a lock
  // this replica holds is alive exactly while its session is in here.
  const live = new Set<string>();
  // Locks being taken, by upload id: committed but not yet visible to a POST reading the store.
  const locking = new Map<string, Promise<unknown>>();
  const active: Gauge = new Gauge({
    name: 'pier_uploads_active',
    help: 'Unfinished uploads',
    registers,
    collect: () => {
      active.set(store.all().filter((u) => u.state === 'active').length);
    },
  });
  const notifier = new CompletedNotifier({ bus: ctx.bus, cache: ctx.cache, log: ctx.log });
  const startedAt = Date.now();
  const self = ctx.peers.self.busId;
  const deps: UploadDeps = {
    store,
    cache: ctx.cache,
    root,
    busId: ctx.peers.self.busId,
    now: ctx.now,
    chunkMaxBytes: ctx.config.upload.chunkBytes,
    maxUnfinished: ctx.config.upload.maxUnfinished,
    leaseMs: LEASE_MS,
    // A lock outlives its writer only until its lease ends; sooner when its replica is known gone:
    // this one restarted (a new busId), or another that heartbeats stopped. On the in-process bus
    // there is no other replica; on NATS, others are trusted as alive until heartbeats had time to come.
    lockAlive: (lock) => {
      if (lock.until <= ctx.now()) return false;
      if (lock.owner === self) return live.has(lock.session);
      if (ctx.bus.kind === 'memory') return false;
      return ctx.peers.alive('upload').some((p) => p.busId === lock.owner) || Date.now() - startedAt < 3 * ctx.config.heartbeatMs;
    },
    locking: (id) => locking.get(id),
    completed: (ev, id) => {
      completed.inc();
      publishEvent(ctx.bus, uploadEvents.completed, ev);
      notifier.notify({ eventId: `upload:${id}`, ...ev });
    },
  };

  /** Locks the upload for one PATCH and opens its write session. */
  async function beginWrite(req: BeginWrite): Promise<WriteSessionReply> {
    const session = randomBytes(9).toString('base64url').replace(/[-_]/g, 'x');
    live.add(session);
    try {
      const u = await lockForWrite(deps, req, session);
      const s = new WriteSession(
        { ...deps, bus: ctx.bus, idleMs: 10_000, onEnd: () => live.delete(session), wrote: (n) => bytes.inc(n), failed: () => failed.inc() },
        u,
        Math.min(deps.chunkMaxBytes, u.fileSize - u.offset),
        req.offset !== null,
      );
      await s.start();
      return { subject: s.subject, offset: u.offset, maxBytes: s.maxBytes };
    } catch (err) {
      live.delete(session); // a lock taken before the failure lapses with it
      throw err;
    }
  }

  await recover(deps, live);
  // On NATS, locks of replicas that died with us are known dead once heartbeats had time to come.
  const lateRecovery = setTimeout(() => void recover(deps, live), 4 * ctx.config.heartbeatMs);

  const hooks = { observe: ctx.metrics.observeActor };
  const subs = [
    serve(ctx.bus, upload.create, (req) => createUpload(deps, req), hooks),
    serve(ctx.bus, upload.get, (req) => getUpload(deps, req.user, req.app, req.id), hooks),
    serve(
      ctx.bus,
      upload.prepare,
      async (req) => {
        // Made one folder at a time from the user's folder, never through a link (walk.ts).
        const dir = root.hostPath(req.user, req.dest);
        await walkDown(root.userFolder(req.user), dir, { create: true, refused: () => new PierError('BAD_REQUEST', 'upload.dest: must lead through folders of the user, without links') });
        return { dir };
      },
      hooks,
    ),
    serve(
      ctx.bus,
      upload.begin,
      (req) => {
        const begun = beginWrite(req);
        locking.set(req.id, begun);
        return begun.finally(() => {
          if (locking.get(req.id) === begun) locking.delete(req.id);
        });
      },
      hooks,
    ),
  ];

  // Uninstalling an app cancels its unfinished uploads.
  const stopWatch = ctx.cache.onApplied((c) => {
    if (c.kind !== 'app' || c.op !== 'delete') return;
    for (const u of store.all()) {
      if (u.state !== 'active' || appId(u.user, u.app) !== c.key) continue;
      void removeUpload(store, u);
    }
  });

  const sweeper = setInterval(() => void sweep(deps, ctx.config.upload.idleMs), Math.min(3_600_000, Math.max(1_000, Math.floor(ctx.config.upload.idleMs / 4))));
  ctx.counters.set('uploads', () => store.all().filter((u) => u.state === 'active').length);
  ctx.log.info({ chunkBytes: deps.chunkMaxBytes }, 'upload actor started');
  return {
    async stop() {
      clearInterval(sweeper);
      clearTimeout(lateRecovery);
      stopWatch();
      for (const s of subs) s.unsubscribe();
      await store.close();
    },
  };
}

/**
 * After a crash: each unfinished upload not being written by a live replica gets the offset of
 * what is really on disk. Bytes past the recorded (acknowledged, fsynced) offset are cut off: they
 * may be a torn write. A complete one is published.
 *
 * It runs at start and once more when other replicas' heartbeats had time to come, so uploads may
 * be in use meanwhile: an upload is repaired only under a lock of its own, taken only if the record
 * is still the one read (no PATCH took or changed it in between), exactly as a PATCH takes it.
 */
async function recover(deps: UploadDeps, live: Set<string>): Promise<void> {
  for (const u of deps.store.all()) {
    if (u.state !== 'active' || (u.lock && deps.lockAlive(u.lock))) continue;
    // One upload that cannot be recovered now (its part tampered with, its disk away) stays as it
    // is: its next PATCH says what is wrong, the idle sweep removes it; the others and the start go on.
    await recoverOne(deps, u, live).catch(() => undefined);
  }
}

async function recoverOne(deps: UploadDeps, seen: Upload, live: Set<string>): Promise<void> {
  // On disk as recorded, and not complete: nothing to repair, nothing to lock.
  if ((await partSize(seen.part)) === seen.offset && seen.offset < seen.fileSize) return;
  const session = `recover${randomBytes(6).toString('hex')}`;
  live.add(session);
  try {
    const u = await deps.store.write((w) => {
      const current = w.get(seen.id);
      if (!current || current.state !== 'active' || current.offset !== seen.offset || (current.lock && deps.lockAlive(current.lock))) return null;
      const locked: Upload = { ...current, lock: { owner: deps.busId, session, until: deps.now() + deps.leaseMs } };
      w.put(locked);
      return locked;
    });
    if (!u) return; // a PATCH got there first: not a crash's leftover
    const size = await partSize(u.part);
    let offset = u.offset;
    if (size > offset) await cutBack(u.part, offset, deps.root.userFolder(u.user));
    if (size < offset) offset = size;
    if (size === 0 && offset === 0) await createPart(u.part, deps.root.userFolder(u.user)).catch(() => undefined);
    const fixed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (current?.lock?.session !== session) return null;
      const next: Upload = { ...current, offset, lock: null };
      w.put(next);
      return next;
    });
    if (fixed && offset === fixed.fileSize) await finish(deps, fixed).catch(() => undefined);
  } finally {
    live.delete(session);
  }
}

/**
 * Unfinished uploads idle past `idleMs` go, with their bytes; one being written never does. The
 * record is removed only if it is still the one read (a PATCH in between makes it not idle).
 */
async function sweep(deps: UploadDeps, idleMs: number): Promise<void> {
  const now = deps.now();
  for (const u of deps.store.all()) {
    if (u.lock && deps.lockAlive(u.lock)) continue;
    if (now - u.updatedAt <= idleMs) continue;
    const removed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (!current || current.updatedAt !== u.updatedAt || (current.lock && deps.lockAlive(current.lock))) return false;
      w.remove(current);
      return true;
    });
    if (removed) await removePart(u.part);
  }
}
