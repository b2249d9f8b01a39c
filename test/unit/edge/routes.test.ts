import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { LISTENERS, routeTable } from '../../../edge/routes.js';
import type { HttpRequestData } from '../../../edge/http/http.js';

const bus = new MemoryBus();
// Nothing here reaches a dependency: every admin handler checks the token first.
const table = routeTable({ bus, adminToken: 'the-admin-token-0123', adminBodyBytes: 1024, providerBodyBytes: 8 << 20 } as never);
const request = (method: string, path: string, headers: Record<string, string> = {}): HttpRequestData => ({ method, path, query: new URLSearchParams(), rawQuery: '', headers, params: {}, remoteAddress: '127.0.0.1', body: Buffer.alloc(0) });

test('every listener answers its probes; the contract paths are where the contract puts them', (t) => {
  for (const name of LISTENERS) {
    const paths = table[name].map((r) => `${r.method} ${r.path}`);
    t.true(paths.includes('get /healthz') && paths.includes('get /readyz'), name);
  }
  const system = table.system.find((r) => r.path === '/system-server/v1alpha1/:dataType/:group/:version/:op')!;
  t.truthy(system.gate, 'provider and vault calls are checked before the body is read');
  t.is(system.bodyLimit, 8 << 20);
  t.true(table.upload.find((r) => r.method === 'patch')!.streamBody === true, 'upload chunks are streamed, never buffered');
  for (const prefix of ['/runtime', '/tapr']) t.true(table.local.some((r) => r.path === `${prefix}/ws/conn/send`), prefix);
});

test('every admin route refuses a request without the admin token, before anything else', async (t) => {
  const admin = table.admin.filter((r) => r.path.startsWith('/admin/'));
  t.true(admin.length >= 12);
  for (const route of admin) {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-xxxxxxxx' }, { authorization: 'the-admin-token-0123' }] as Array<Record<string, string>>) {
      const refused = await Promise.resolve()
        .then(() => route.handler({ ...request(route.method, route.path, headers) }))
        .then(() => 'answered', (e: { code: string }) => e.code);
      t.is(refused, 'UNAUTHORIZED', `${route.method} ${route.path} ${JSON.stringify(headers)}`);
    }
  }
});

test('#52 F6: an app\'s routes (provider, vault, local API) and the operator\'s check the caller in their gate, which tracing trusts; the access request and the probes do not', async (t) => {
  const checked = (r: { gate?: unknown; gateChecksCaller?: boolean }) => r.gateChecksCaller === true && r.gate !== undefined;
  const probe = (path: string) => ['/healthz', '/readyz', '/metrics'].includes(path);
  t.true(checked(table.system.find((r) => r.path === '/system-server/v1alpha1/:dataType/:group/:version/:op')!));
  t.false(checked(table.system.find((r) => r.path === '/permission/v1alpha1/access')!), 'the proof is checked by the token actor, after the trace is chosen');
  for (const r of table.local.filter((r) => !probe(r.path))) t.true(checked(r), `${r.method} ${r.path}`);
  for (const r of table.admin.filter((r) => r.path.startsWith('/admin/'))) {
    t.true(checked(r), `${r.method} ${r.path}`);
    const refused = await r.gate!(request(r.method, r.path, { authorization: 'Bearer wrong-token-xxxxxxxx' })).then(() => 'passed', (e: { code: string }) => e.code);
    t.is(refused, 'UNAUTHORIZED', `${r.method} ${r.path}: the operator is checked before the body`);
    t.is(await r.gate!(request(r.method, r.path, { authorization: 'Bearer the-admin-token-0123' })), null);
  }
  for (const name of ['public', 'upload'] as const) t.false(table[name].some(checked), `${name}: browsers' listeners are hints, never checked callers`);
});
