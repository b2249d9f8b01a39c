import { ask } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { uploadNotices, type UploadNotice } from '../../bus/subjects.js';
import type { Logger } from '../../lib/runtime/log.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';

/**
 * Hands each completed upload of an app that declared `upload.callback` to a callback replica,
 * which delivers it to the app (signed, retried). Asking is retried too, with backoff, for up to
 * `giveUpMs` (no callback replica running, all of them busy); at most `max` wait at once, past it
 * the oldest concerns are the app's to catch up on (logged). Never holds up the upload itself.
 */
export class CompletedNotifier {
  private pending = 0;

  constructor(
    private readonly deps: { bus: Bus; cache: Pick<RegistryCache, 'app'>; log: Logger },
    private readonly options: { giveUpMs: number; max: number } = { giveUpMs: 60_000, max: 10_000 },
  ) {}

  notify(notice: UploadNotice): void {
    const app = this.deps.cache.app(notice.user, notice.app);
    if (!app?.upload?.callback) return;
    if (this.pending >= this.options.max) {
      this.deps.log.warn({ eventId: notice.eventId }, 'upload callback not asked for: too many waiting');
      return;
    }
    this.pending++;
    void this.ask(notice).finally(() => this.pending--);
  }

  private async ask(notice: UploadNotice): Promise<void> {
    const end = Date.now() + this.options.giveUpMs;
    for (let wait = 200; ; wait = Math.min(wait * 2, 5_000)) {
      try {
        await ask(this.deps.bus, uploadNotices.deliver, notice);
        return;
      } catch (err) {
        const e = err instanceof PierError ? err : null;
        // A refusal of the notice itself (the app is gone, a bad notice) will not change by waiting.
        if (e && e.code !== 'UNAVAILABLE' && e.code !== 'TIMEOUT' && e.code !== 'RATE_LIMITED') {
          this.deps.log.warn({ eventId: notice.eventId, err: e.message }, 'upload callback refused');
          return;
        }
        if (Date.now() + wait > end) {
          this.deps.log.warn({ eventId: notice.eventId, err: (err as Error).message }, 'upload callback given up: no callback replica took it');
          return;
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }
}
