import { AsyncLocalStorage } from 'node:async_hooks';

/** The W3C trace context an app's work runs in (Pier's docs/operations.md "Tracing"). */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^\s,]*)?$/;
const current = new AsyncLocalStorage<TraceContext>();

/** A trace context from headers as they came (invalid or absent: undefined). */
export function traceFrom(traceparent: string | undefined, tracestate: string | undefined): TraceContext | undefined {
  if (!traceparent || traceparent.length > 256 || !TRACEPARENT.test(traceparent)) return undefined;
  return tracestate && tracestate.length <= 512 ? { traceparent, tracestate } : { traceparent };
}

/**
 * Runs `fn` in `context`: every call the SDK makes inside it (vault, provider, gateway, access
 * tokens) sends its `traceparent` and `tracestate`, so Pier and the providers it calls continue
 * the app's trace. A `CallbackReceiver` runs `onEvent` in the event's trace already.
 */
export function withTrace<T>(context: TraceContext | undefined, fn: () => T): T {
  return context ? current.run(context, fn) : fn();
}

/** The trace headers of the current context (none outside one). */
export function traceHeaders(): Record<string, string> {
  const c = current.getStore();
  if (!c) return {};
  return c.tracestate ? { traceparent: c.traceparent, tracestate: c.tracestate } : { traceparent: c.traceparent };
}
