import { type Exchange } from '../../bus/exchange.js';
import { serve } from '../../bus/verbs.js';
import type { ExecutionContext } from 'ava';
import { MemoryBus } from '../../bus/bus-memory.js';
import { PierError } from '../../bus/errors.js';
import type { HttpReply, HttpRequestData } from '../../edge/http/http.js';

/**
 * Stubs for unit tests of the edge's API modules (tus-node-server's handler tests are the model):
 * an in-process bus with fake responders that record what the module asked, and a request to hand
 * the module. No listener, no socket.
 */

/** An in-process bus, closed when the test ends. */
export function stubBus(t: ExecutionContext): MemoryBus {
  const bus = new MemoryBus(undefined, true);
  t.teardown(() => bus.close());
  return bus;
}

/**
 * A fake actor for one endpoint: each request (schema-checked, as the real actor's) is recorded in
 * the returned array and answered by `reply` (a throw is answered as that error).
 */
export function responder<Req, Res>(bus: MemoryBus, ep: Exchange<Req, Res>, reply: (req: Req, n: number) => Res | Promise<Res>): Req[] {
  const seen: Req[] = [];
  serve(bus, ep, (req) => {
    seen.push(req);
    return reply(req, seen.length);
  });
  return seen;
}

/** A request as the listener would hand it over, with `over` on top of a bodyless GET. */
export function request(over: Partial<Omit<HttpRequestData, 'body'>> & { body?: Buffer | string | object } = {}): HttpRequestData {
  const { body, ...rest } = over;
  const bytes = body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return { method: 'get', path: '/', query: new URLSearchParams(), rawQuery: '', headers: {}, params: {}, remoteAddress: '192.0.2.7', body: bytes, ...rest };
}

/** What a module threw (its code, and its message naming the field), or a failure of the test when it answered. */
export async function refusal(t: ExecutionContext, answer: Promise<unknown> | (() => unknown)): Promise<{ code: string; message: string }> {
  const err = await t.throwsAsync(Promise.resolve().then(() => (typeof answer === 'function' ? answer() : answer)), { instanceOf: PierError });
  return { code: err!.code, message: err!.message };
}

/** A reply's JSON body, for exact comparison. */
export const jsonOf = (reply: HttpReply | null) => reply?.json;
