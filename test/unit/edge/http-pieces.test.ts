import test from 'ava';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { PierError } from '../../../bus/errors.js';
import { errorReply, ok } from '../../../edge/http/envelope.js';
import { queryParam, type HttpDeps, type Route } from '../../../edge/http/http.js';
import { parseJsonBody } from '../../../edge/http/json-body.js';
import { mountRoutes } from '../../../edge/http/mount-routes.js';
import { currentTrace, useTracer, type ParentTrust, type TraceContext, type Tracer } from '../../../bus/trace.js';
import { until } from '../../helpers/wait.js';
import { refusal } from '../../helpers/edge-stubs.js';

// The HTTP plumbing split out of http.ts, against a fake uWS: the envelope, the JSON body, and a
// mounted route table (405 with Allow, 404, body limits, gates before the body, errors to statuses).

test('the envelope: code 0 on success, data only when given; an error has its status as code', (t) => {
  t.deepEqual(ok(), { status: 200, json: { code: 0, message: 'success' } });
  t.deepEqual(ok([1], 'done'), { status: 200, json: { code: 0, message: 'done', data: [1] } });
  t.deepEqual(errorReply(new PierError('CONFLICT', 'exists', { data: { id: 1 } })), { status: 409, json: { code: 409, message: 'exists', data: { id: 1 } } });
});

test('queryParam answers what URLSearchParams.get answers, for any query', (t) => {
  const answers = (raw: string, name: string) => t.is(queryParam({ rawQuery: raw, query: new URLSearchParams(raw) }, name), new URLSearchParams(raw).get(name), `${JSON.stringify(raw)} ${JSON.stringify(name)}`);
  const fixed = ['', 'workspace=chat', 'a=1&workspace=chat&workspace=other', 'workspace', 'workspace=', '&&workspace=x&', '?workspace=x', '??workspace=x', 'workspace=a=b', 'workspaces=x&workspace=y', 'xworkspace=1', '=x&workspace', 'workspace=%41', 'workspace=a+b', 'work%73pace=x', 'workspace=caf\u00e9', 'workspace=\ud800'];
  for (const raw of fixed) for (const name of ['workspace', 'a', '']) answers(raw, name);
  // And queries made at random of the characters that matter.
  const alphabet = ['w', 'a', '=', '&', '?', '%', '+', '4', '1', ' ', '\u00e9', '\ud800'];
  let seed = 7;
  const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  for (let i = 0; i < 5_000; i++) {
    const raw = Array.from({ length: Math.floor(next() * 12) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
    for (const name of ['w', 'a', 'wa', '']) answers(raw, name);
  }
});

test('a JSON body must be an object, parse, and nest at most 64 levels: else 400 naming body', async (t) => {
  const body = (text: string) => ({ body: Buffer.from(text) });
  t.deepEqual(parseJsonBody(body('{"a":[1]}')), { a: [1] });
  for (const [text, message] of [
    ['', 'body: must be a JSON object'],
    ['[]', 'body: must be a JSON object'],
    ['null', 'body: must be a JSON object'],
    ['{"a":', 'body: is not valid JSON'],
    [`${'['.repeat(65)}${']'.repeat(65)}`, 'body: JSON must not nest deeper than 64 levels'],
  ]) {
    t.deepEqual(await refusal(t, () => parseJsonBody(body(text))), { code: 'BAD_REQUEST', message }, text.slice(0, 10));
  }
});

/** A uWS response as far as the edge uses it: records what is written, lets the test feed the body. */
class FakeResponse {
  status = '';
  headers: Array<[string, string]> = [];
  body = '';
  ended = false;
  paused = 0;
  resumed = 0;
  addressAsked = 0;
  gone = false;
  onDataHandler?: (chunk: ArrayBuffer, isLast: boolean) => void;
  onAbortedHandler?: () => void;
  writeStatus(s: string) {
    this.status = s;
    return this;
  }
  writeHeader(k: string, v: string) {
    this.headers.push([k, v]);
    return this;
  }
  end(b: string | Uint8Array = '') {
    this.body += Buffer.from(b).toString();
    this.ended = true;
    return this;
  }
  write(b: Uint8Array) {
    this.body += Buffer.from(b).toString();
    return true;
  }
  cork(fn: () => void) {
    fn();
    return this;
  }
  onData(h: (chunk: ArrayBuffer, isLast: boolean) => void) {
    this.onDataHandler = h;
    return this;
  }
  onAborted(h: () => void) {
    this.onAbortedHandler = h;
    return this;
  }
  /** The client goes away: uWS calls the abort handler, and any later touch of `res` would throw. */
  abort() {
    this.gone = true;
    this.onAbortedHandler?.();
  }
  pause() {
    this.paused++;
  }
  resume() {
    this.resumed++;
  }
  getRemoteAddressAsText() {
    if (this.gone) throw new Error('uWS: the response was aborted');
    this.addressAsked++;
    return new TextEncoder().encode('192.0.2.7').buffer;
  }
  feed(text: string, isLast: boolean) {
    const bytes = Buffer.from(text);
    this.onDataHandler!(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), isLast);
  }
}

function fakeRequest(method: string, url: string, headers: Record<string, string> = {}, params: string[] = []): HttpRequest {
  return {
    forEach: (cb: (k: string, v: string) => void) => Object.entries(headers).forEach(([k, v]) => cb(k, v)),
    getParameter: (i: number) => params[i],
    getMethod: () => method,
    getUrl: () => url,
    getQuery: () => 'a=1',
  } as unknown as HttpRequest;
}

/** Mounts `routes` on a fake app; `hit` runs the callback uWS would pick for a method and pattern. */
function mount(routes: Route[], listener = 'test') {
  const mounted = new Map<string, (res: HttpResponse, req: HttpRequest) => void>();
  const app = new Proxy({}, { get: (_o, method: string) => (path: string, h: (res: HttpResponse, req: HttpRequest) => void) => mounted.set(`${method} ${path}`, h) }) as TemplatedApp;
  const counted: string[] = [];
  const deps = {
    listener,
    log: { error: () => undefined, warn: () => undefined },
    metrics: {
      httpCount: (_listener: string, _route: string, status: string) => ({ inc: () => counted.push(status) }),
      httpTime: () => ({ observe: () => undefined }),
      handlerFailures: { inc: () => undefined },
    },
  } as unknown as HttpDeps;
  mountRoutes(app, routes, deps);
  const hit = (key: string, req: HttpRequest) => {
    const res = new FakeResponse();
    mounted.get(key)!(res as unknown as HttpResponse, req);
    return res;
  };
  return { mounted, hit, counted };
}

const answered = (res: FakeResponse) => until('the answer', () => res.ended, 2_000);

test('routes are mounted with a 405 naming the allowed methods and a 404 for the rest', async (t) => {
  const { mounted, hit } = mount([
    { method: 'get', path: '/things', handler: () => ok() },
    { method: 'del', path: '/things', handler: () => ok() },
  ]);
  t.deepEqual([...mounted.keys()], ['get /things', 'del /things', 'any /things', 'any /*']);
  const wrong = hit('any /things', fakeRequest('put', '/things'));
  t.is(wrong.status, '405 Method Not Allowed');
  t.deepEqual(wrong.headers, [['content-type', 'application/json'], ['allow', 'GET, DELETE']]);
  t.deepEqual(JSON.parse(wrong.body), { code: 405, message: 'method not allowed; use GET, DELETE' });
  const missing = hit('any /*', fakeRequest('get', '/nowhere'));
  t.is(missing.status, '404 Not Found');
  t.deepEqual(JSON.parse(missing.body), { code: 404, message: 'no such route' });
});

test('a handler gets the request copied out (params decoded, query, address, body) and its reply is sent and counted', async (t) => {
  let seen: unknown;
  const { hit, counted } = mount([
    {
      method: 'post',
      path: '/things/:name',
      bodyLimit: 100,
      handler: (req) => {
        seen = { params: req.params, q: req.query.get('a'), raw: req.rawQuery, addr: req.remoteAddress, body: req.body.toString(), ct: req.headers['content-type'] };
        return { status: 201, text: 'made', headers: { 'x-made': '1' } };
      },
    },
  ]);
  const res = hit('post /things/:name', fakeRequest('post', '/things/a%20b', { 'content-type': 'text/plain' }, ['a%20b']));
  res.feed('hel', false);
  res.feed('lo', true);
  await answered(res);
  t.deepEqual(seen, { params: { name: 'a b' }, q: '1', raw: 'a=1', addr: '192.0.2.7', body: 'hello', ct: 'text/plain' });
  t.is(res.status, '201 Created');
  t.deepEqual(res.headers, [['x-made', '1']]);
  t.is(res.body, 'made');
  t.deepEqual(counted, ['201']);
});

test('the remote address is asked of uWS only when a handler reads it, and reads as empty once the client has gone', async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let late: string | undefined;
  const { hit } = mount([
    { method: 'get', path: '/quiet', handler: () => ok() },
    {
      method: 'get',
      path: '/late',
      handler: async (req) => {
        await held;
        late = req.remoteAddress;
        return ok();
      },
    },
  ]);
  const quiet = hit('get /quiet', fakeRequest('get', '/quiet'));
  await answered(quiet);
  t.is(quiet.addressAsked, 0, 'a handler that never reads the address costs no call into uWS');
  const gone = hit('get /late', fakeRequest('get', '/late'));
  gone.abort(); // the handler is waiting on `held`

  release();
  await until('the late handler to read the address', () => late !== undefined, 2_000);
  t.is(late, '', 'read after the abort: empty, and uWS was not touched (it would throw)');
  t.is(gone.addressAsked, 0);
});

test('once a request is answered, the handlers uWS keeps (until the connection is used again) no longer hold the request', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  let seen: WeakRef<object> | undefined;
  const { hit } = mount([
    {
      method: 'post',
      path: '/kept',
      bodyLimit: 100,
      handler: (req) => {
        seen = new WeakRef(req);
        return ok();
      },
    },
  ]);
  const res = hit('post /kept', fakeRequest('post', '/kept'));
  res.feed('hello', true);
  await answered(res);
  t.truthy(res.onAbortedHandler && res.onDataHandler, 'the fake keeps both handlers, as uWS does');
  for (let i = 0; i < 10 && seen!.deref() !== undefined; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
  t.is(seen!.deref(), undefined, 'the request was collected while its handlers are still held');
  res.onDataHandler!(new ArrayBuffer(3), true); // a late call into a held relay does nothing
  res.onAbortedHandler!();
});

test('a body over the limit is 413 naming body, by its declared length or as it arrives', async (t) => {
  const { hit } = mount([{ method: 'post', path: '/b', bodyLimit: 4, handler: () => ok() }]);
  const declared = hit('post /b', fakeRequest('post', '/b', { 'content-length': '5' }));
  await answered(declared);
  t.deepEqual([declared.status, JSON.parse(declared.body)], ['413 Payload Too Large', { code: 413, message: 'body: must be at most 4 bytes' }]);
  const streamed = hit('post /b', fakeRequest('post', '/b'));
  streamed.feed('abc', false);
  streamed.feed('de', true);
  await answered(streamed);
  t.is(streamed.status, '413 Payload Too Large');
});

test("a gate's refusal is answered before the body is read; a pass lets the body through", async (t) => {
  let handled = 0;
  const { hit } = mount([
    {
      method: 'post',
      path: '/g',
      bodyLimit: 100,
      gate: async (req) => (req.headers['x-ok'] ? null : { status: 401, json: { code: 401, message: 'no' } }),
      handler: () => (handled++, ok()),
    },
  ]);
  const refused = hit('post /g', fakeRequest('post', '/g'));
  refused.feed('part', false);
  await answered(refused);
  t.is(refused.status, '401 Unauthorized');
  t.is(handled, 0);
  t.true(refused.paused >= 1 && refused.resumed >= 1, 'the socket was held, then let go to drain unread');
  const passed = hit('post /g', fakeRequest('post', '/g', { 'x-ok': '1' }));
  passed.feed('all', true);
  await answered(passed);
  t.is(passed.status, '200 OK');
  t.is(handled, 1);
});

test('a pass the route remembers (gatePassed) lets the body through without running the gate; a refusal still comes from the gate', async (t) => {
  let gateRuns = 0;
  let handled = 0;
  const { hit } = mount([
    {
      method: 'post',
      path: '/p',
      bodyLimit: 100,
      gate: async (req) => (gateRuns++, req.headers['x-ok'] ? null : { status: 401, json: { code: 401, message: 'no' } }),
      gatePassed: (req) => req.headers['x-remembered'] === '1',
      handler: (req) => (handled++, ok({ body: req.body.toString() })),
    },
  ]);
  const remembered = hit('post /p', fakeRequest('post', '/p', { 'x-remembered': '1' }));
  remembered.feed('part', false);
  remembered.feed('-rest', true);
  await answered(remembered);
  t.deepEqual([remembered.status, JSON.parse(remembered.body)], ['200 OK', { code: 0, message: 'success', data: { body: 'part-rest' } }]);
  t.is(remembered.paused, 0, 'nothing held: the pass was known at once');
  t.is(gateRuns, 0);
  const refused = hit('post /p', fakeRequest('post', '/p'));
  refused.feed('part', false);
  await answered(refused);
  t.is(refused.status, '401 Unauthorized');
  t.deepEqual([gateRuns, handled], [1, 1]);
});

test('a thrown PierError becomes its status; anything else a generic 500', async (t) => {
  const { hit } = mount([
    { method: 'get', path: '/e', handler: () => Promise.reject(new PierError('FORBIDDEN', 'op x: not granted')) },
    { method: 'get', path: '/x', handler: () => Promise.reject(new Error('secret detail')) },
  ]);
  const forbidden = hit('get /e', fakeRequest('get', '/e'));
  await answered(forbidden);
  t.deepEqual([forbidden.status, JSON.parse(forbidden.body)], ['403 Forbidden', { code: 403, message: 'op x: not granted' }]);
  const failed = hit('get /x', fakeRequest('get', '/x'));
  await answered(failed);
  t.is(failed.status, '500 Internal Server Error');
  t.notRegex(failed.body, /secret detail/);
});

/** A tracer that records each request span it is asked for: whose parent, and whether dated back. */
function recordingTracer() {
  const spans: Array<{ name: string; trust: ParentTrust; datedBack: boolean; ended: boolean; context: TraceContext }> = [];
  const tracer: Tracer = {
    exporting: true,
    incoming(name, _kind, _carrier, trust, _attributes, _links, startedAt) {
      const span = { name, trust, datedBack: startedAt !== undefined, ended: false, context: { traceparent: `00-${'a'.repeat(32)}-${String(spans.length + 1).padStart(16, '0')}-01` } };
      spans.push(span);
      return { context: span.context, set() {}, fail() {}, end: () => void (span.ended = true) };
    },
    child: () => null,
  };
  return { spans, tracer };
}

// Serial: the tracer is the process's, and no other test of this worker may run while it is installed.
test.serial('hostile (#52 F6): only a caller its gate checked is followed, the span starting after the gate; everyone else on these listeners is anonymous, a browser a hint', async (t) => {
  const { spans, tracer } = recordingTracer();
  useTracer(tracer);
  t.teardown(() => useTracer(null));
  const inGate: Array<TraceContext | undefined> = [];
  const inHandler: Array<TraceContext | undefined> = [];
  let holdGate: (() => void) | null = null;
  const gate: Route['gate'] = async (req) => {
    inGate.push(currentTrace());
    if (req.headers['x-hold']) await new Promise<void>((r) => (holdGate = r));
    if (req.headers['x-throw']) throw new PierError('UNAUTHORIZED', 'X-App-Key and X-App-Secret are required');
    return req.headers['x-ok'] ? null : { status: 401, json: { code: 401, message: 'no' } };
  };
  const handler = () => (inHandler.push(currentTrace()), ok());
  const routes: Route[] = [
    { method: 'post', path: '/checked', bodyLimit: 4, gate, gateChecksCaller: true, handler },
    { method: 'post', path: '/unchecked', bodyLimit: 4, gate, handler },
  ];
  const system = mount(routes, 'system');
  const call = async (m: ReturnType<typeof mount>, path: string, headers: Record<string, string>) => {
    const res = m.hit(`post ${path}`, fakeRequest('post', path, { traceparent: `00-${'b'.repeat(32)}-${'c'.repeat(16)}-01`, ...headers }));
    res.feed('ab', true);
    await answered(res);
    return res.status;
  };

  t.is(await call(system, '/checked', { 'x-ok': '1' }), '200 OK');
  t.deepEqual(spans.map((s) => [s.trust, s.datedBack, s.ended]), [['trusted', true, true]], 'a passed gate: the caller followed, the span dated from arrival');
  t.is(inGate[0], undefined, 'the gate runs outside any trace');
  t.deepEqual(inHandler[0], spans[0]!.context, 'the handler runs in the span');

  t.is(await call(system, '/checked', {}), '401 Unauthorized');
  t.is(await call(system, '/checked', { 'x-throw': '1' }), '401 Unauthorized');
  t.deepEqual(spans.slice(1).map((s) => [s.trust, s.ended]), [['anonymous', true], ['anonymous', true]], 'a refused caller is anonymous');

  // Answered before the gate has (a declared body over the limit): anonymous, and one span only.
  const early = system.hit('post /checked', fakeRequest('post', '/checked', { 'content-length': '9', 'x-hold': '1', 'x-ok': '1' }));
  await answered(early);
  t.is(early.status, '413 Payload Too Large');
  await until('the held gate', () => holdGate !== null);
  holdGate!();
  await new Promise((r) => setImmediate(r));
  t.deepEqual(spans.slice(3).map((s) => [s.trust, s.ended]), [['anonymous', true]]);

  // A route whose gate does not check the caller (the access request's kind): anonymous at once.
  t.is(await call(system, '/unchecked', { 'x-ok': '1' }), '200 OK');
  t.deepEqual(spans.slice(4).map((s) => [s.trust, s.datedBack]), [['anonymous', false]]);
  t.deepEqual(inGate.at(-1), spans[4]!.context, 'its gate runs in its span');

  // Browsers' listeners: a hint, as before, whatever the route says.
  t.is(await call(mount(routes, 'upload'), '/checked', { 'x-ok': '1' }), '200 OK');
  t.deepEqual(spans.slice(5).map((s) => s.trust), ['hint']);
});
