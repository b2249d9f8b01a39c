import { PierError } from '../../bus/errors.js';
import { appId } from '../../bus/ids.js';
import type { GatewayEvent, UploadNotice } from '../../bus/subjects.js';
import type { CallbackTarget } from '../../lib/policy/callback-target.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import type { Outcome } from './delivery.js';

/** An upload notice as the callback body carries it: `action: "upload"`, the file in `data`. */
export function uploadEvent(n: UploadNotice): GatewayEvent {
  return { eventId: n.eventId, connId: '', edge: '', user: n.user, app: n.app, seq: 0, oldest: 0, action: 'upload' as GatewayEvent['action'], data: { path: n.path, size: n.size }, cookie: null };
}

/** The app's `upload.callback` target in this replica's registry view (never from the notice). */
export function uploadTarget(cache: Pick<RegistryCache, 'app'>, user: string, app: string): CallbackTarget {
  const view = cache.app(user, app);
  const cb = view?.upload?.callback;
  if (!view || !cb) throw new PierError('NOT_FOUND', `app "${appId(user, app)}" is not installed here or declares no upload.callback`);
  return { host: view.host, port: cb.port, url: cb.url };
}

/** Whether an app-view `path` is inside the app's `upload.dest` (both normalised, `..` refused). */
export function inUploadDest(cache: Pick<RegistryCache, 'app'>, user: string, app: string, path: string): boolean {
  const dest = cache.app(user, app)?.upload?.dest;
  if (!dest || !path.startsWith('/') || path.split('/').some((s) => s === '..' || s === '.')) return false;
  const base = dest.endsWith('/') ? dest : `${dest}/`;
  return path.startsWith(base);
}

/**
 * Takes upload notices and delivers each in the background (signed, retried like gateway events).
 * The answer only says it was taken; at most `max` wait at once (past it, RATE_LIMITED: the upload
 * role asks again later), so a slow or dead app cannot make a replica hold unbounded work.
 */
export class UploadNotices {
  private pending = 0;

  constructor(
    private readonly deps: {
      target: (user: string, app: string) => CallbackTarget;
      /** Whether `path` (the app's view) lies inside the app's `upload.dest`. */
      inDest: (user: string, app: string, path: string) => boolean;
      deliver: (ev: GatewayEvent, target: CallbackTarget) => Promise<Outcome>;
      settled: (outcome: Outcome, notice: UploadNotice) => void;
    },
    private readonly max = 10_000,
  ) {}

  accept(notice: UploadNotice): { accepted: boolean } {
    const target = this.deps.target(notice.user, notice.app);
    // What the upload role says landed must lie in the app's own upload folder: a stolen upload
    // identity cannot have Pier sign "uploaded" for any path it likes.
    if (!this.deps.inDest(notice.user, notice.app, notice.path)) throw new PierError('BAD_REQUEST', 'path: not inside the app\'s upload folder');
    if (this.pending >= this.max) throw new PierError('RATE_LIMITED', `${this.max} upload callbacks are waiting already`);
    this.pending++;
    void this.deps
      .deliver(uploadEvent(notice), target)
      .then((outcome) => this.deps.settled(outcome, notice))
      .catch(() => this.deps.settled('dropped', notice))
      .finally(() => this.pending--);
    return { accepted: true };
  }

  waiting(): number {
    return this.pending;
  }
}
