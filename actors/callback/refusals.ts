import type { GatewayEvent } from '../../bus/subjects.js';
import type { Logger } from '../../lib/runtime/log.js';

/**
 * Why a callback replica refused an event: `unknown_app` (its registry view has no target for the
 * app, and it held no connection that captured one), `registry_unavailable` (its view is too stale
 * to say), `mismatched_app` (the event names another app than the connection it belongs to) or
 * `address_policy` (the app's target resolves only to addresses the policy forbids).
 */
export type RefusalReason = 'unknown_app' | 'registry_unavailable' | 'mismatched_app' | 'address_policy' | 'forged_moved';

/** The reason of an event refused with error `code` (EventAck `ok: false`). */
export function reasonOf(code: string): RefusalReason {
  if (code === 'NOT_FOUND') return 'unknown_app';
  if (code === 'BAD_REQUEST') return 'mismatched_app';
  return 'registry_unavailable';
}

/**
 * Refused callbacks: each one counted; one warn line per connection and reason, so that a flood of
 * forged events, or a connection whose every event is refused alike, does not flood the log. The
 * line names the connection, user, app and action, never the data, the cookie or a secret.
 */
export class Refusals {
  private readonly warned = new Set<string>();

  constructor(
    private readonly count: (reason: RefusalReason) => void,
    private readonly log: Logger,
    /** Connections remembered as warned about; past it the memory starts again (bounded by outside input). */
    private readonly maxRemembered = 10_000,
  ) {}

  /** A notice that could not be believed (not signed by the process it names): counted, one warn line per kind. */
  forged(kind: string, why: string): void {
    this.count(`forged_${kind}` as RefusalReason);
    if (this.warned.has(kind)) return;
    if (this.warned.size >= this.maxRemembered) this.warned.clear();
    this.warned.add(kind);
    this.log.warn({ reason: `forged_${kind}`, why }, 'gateway notice refused');
  }

  refused(reason: RefusalReason, ev: GatewayEvent, why: string): void {
    this.count(reason);
    const key = `${reason} ${ev.connId}`;
    if (this.warned.has(key)) return;
    if (this.warned.size >= this.maxRemembered) this.warned.clear();
    this.warned.add(key);
    this.log.warn({ reason, why, connId: ev.connId, user: ev.user, app: ev.app, action: ev.action, seq: ev.seq }, 'gateway callback refused');
  }
}
