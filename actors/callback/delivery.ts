import { createHmac } from 'node:crypto';
import { Agent } from 'undici';
import type { GatewayEvent } from '../../bus/subjects.js';
import { appId } from '../../bus/ids.js';
import { activeTracer, traceHeaders, type TraceContext } from '../../bus/trace.js';
import { isPolicyRefusal, type AddressPolicy } from '../../lib/policy/address-policy.js';
import { callbackOrigin, type CallbackTarget } from '../../lib/policy/callback-target.js';
import { policyConnector } from '../../lib/policy/policy-connector.js';

export interface DeliveryOptions {
  timeoutMs: number;
  /** The clock signatures are stamped with (ms since the epoch). */
  now: () => number;
  /** Keep retrying an event for at least this long before counting it as dropped. */
  retryMs: number;
}

/**
 * `refused`: the target resolves only to addresses the address policy forbids; never retried.
 * `handedOver`: `stop` was aborted (the connection moved to another replica) before a 2xx.
 */
export type Outcome = 'delivered' | 'dropped' | 'refused' | 'handedOver';

/** The callback body (docs/protocol.md "Gateway"), exactly these four fields. */
export function callbackBody(ev: GatewayEvent): string {
  return JSON.stringify({ data: ev.data, action: ev.action, user_name: ev.user, conn_id: ev.connId });
}

/**
 * `X-Pier-Signature` (docs/protocol.md "Gateway"): `t=<unix seconds>,v1=<hex>`, the hex being HMAC-SHA256
 * keyed by the app secret over `<t>.<event id>.<body>`. Binding the time and the event id lets an
 * app refuse a captured callback replayed later or under another event's id. Stamped afresh on
 * each attempt, so a retry is never older than the app's window.
 */
export function signature(seconds: number, eventId: string, body: string, secret: string): string {
  return `t=${seconds},v1=${createHmac('sha256', secret).update(`${seconds}.${eventId}.${body}`).digest('hex')}`;
}

/** Waits `ms`, or less when `stop` is aborted meanwhile. */
const pause = (ms: number, stop?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stop?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stop?.addEventListener('abort', done, { once: true });
  });

/**
 * POSTs gateway events to apps. Any 2xx is delivered; anything else (status, refused connection,
 * timeout) is retried with exponential backoff (100 ms doubling to 5 s) until `retryMs` has passed.
 * Every connection is dialled through the address policy provider calls go through (resolved at
 * dial time, the allowed address dialled, the Host header still the app's host): a target the
 * policy forbids is `refused` at once, since waiting will not make it allowed.
 */
export class Deliverer {
  private readonly agent: Agent;
  /** Targets whose last attempt failed (refused, reset, timed out, non-2xx), by origin: what a stop need not wait for. */
  private readonly failing = new Set<string>();

  constructor(
    private readonly options: DeliveryOptions,
    private readonly hooks: { retried: () => void },
    policy: AddressPolicy,
  ) {
    this.agent = new Agent({ connections: 64, keepAliveTimeout: 30_000, connect: policyConnector(policy, 5_000) });
  }

  /**
   * Delivers `ev` to `target` (the connection's, from the registry view; never from the event), in
   * `trace` (the event's: each attempt is a span of it, and the app gets its traceparent). Once
   * `stop` is aborted no attempt starts and the one on the wire is abandoned: `handedOver`.
   */
  async deliver(ev: GatewayEvent, target: CallbackTarget, secret: () => Promise<string>, trace?: TraceContext, stop?: AbortSignal): Promise<Outcome> {
    const body = callbackBody(ev);
    const origin = callbackOrigin(target);
    // Monotonic: a wall clock stepped forward must not give an event up after one attempt.
    const deadline = performance.now() + this.options.retryMs;
    const upload = (ev.action as string) === 'upload';
    for (let attempt = 0, wait = 100; ; attempt++, wait = Math.min(wait * 2, 5_000)) {
      if (stop?.aborted) return 'handedOver';
      if (attempt > 0) this.hooks.retried();
      const span = trace ? activeTracer().child(upload ? 'POST upload callback' : 'POST callback', 'client', { 'pier.app': appId(ev.user, ev.app), 'pier.event.action': ev.action, 'pier.attempt': attempt + 1 }, trace) : null;
      try {
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          'x-pier-event-id': ev.eventId,
          'x-pier-seq': String(ev.seq),
          'x-pier-signature': signature(Math.floor(this.options.now() / 1000), ev.eventId, body, await secret()),
          ...traceHeaders(span?.context ?? trace),
        };
        if (ev.cookie) headers.cookie = ev.cookie;
        const res = await this.agent.request({ origin, path: target.url, method: 'POST', headers, body, headersTimeout: this.options.timeoutMs, bodyTimeout: this.options.timeoutMs, signal: stop });
        await res.body.dump();
        span?.set('http.response.status_code', res.statusCode);
        if (res.statusCode >= 200 && res.statusCode < 300) {
          span?.end();
          this.failing.delete(origin);
          return 'delivered';
        }
        span?.fail(String(res.statusCode));
        span?.end();
      } catch (err) {
        span?.fail(isPolicyRefusal(err) ? 'ADDRESS_POLICY' : 'UNREACHABLE');
        span?.end();
        if (isPolicyRefusal(err)) return 'refused';
        if (stop?.aborted) return 'handedOver';
        // refused, reset, timed out, not resolved, or no secret yet: retried like a non-2xx
      }
      // Bounded by the targets of the connections this replica holds.
      this.failing.add(origin);
      if (performance.now() >= deadline) return 'dropped';
      await pause(Math.min(wait, deadline - performance.now() + 1), stop);
    }
  }

  /** Whether `target`'s last attempt failed (and none has succeeded since). */
  isFailing(target: CallbackTarget): boolean {
    return this.failing.has(callbackOrigin(target));
  }

  /** Lets requests in flight finish for a moment, then drops them (an app that never answers cannot hold a stop). */
  async close(graceMs = 1_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const closed = await Promise.race([this.agent.close().then(() => true), new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
    clearTimeout(timer);
    if (!closed) await this.agent.destroy();
  }
}
