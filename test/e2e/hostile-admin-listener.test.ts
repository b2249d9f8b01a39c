import test from 'ava';
import { request } from 'undici';
import { join } from 'node:path';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { freeLoopbackPort } from '../helpers/nats-server.js';

// Finding S-3 (docs/security.md, "The admin listener"): a web page the operator visits can reach
// 127.0.0.1 too, by DNS re-binding (its own name, answered with 127.0.0.1) or by posting a form.
let pier: PierProcess;
let dir: string;
let probePort: number;
const ADMIN = 'admin-token-for-the-s3-test-0123456789';

test.before(async () => {
  dir = tempDir();
  probePort = await freeLoopbackPort();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_ADMIN_TOKEN: ADMIN, PIER_PROBE_PORT: String(probePort), PIER_ADMIN_HOSTS: 'pier-admin.internal' }));
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

const get = async (port: number, path: string, host: string) => {
  const r = await request(`http://127.0.0.1:${port}${path}`, { headers: { host, authorization: `Bearer ${ADMIN}` } });
  return { status: r.statusCode, text: await r.body.text() };
};

test('S-3: a foreign Host (a page re-bound by DNS to 127.0.0.1) reads neither /metrics, the console page nor the admin API; addresses, loopback and configured names do', async (t) => {
  const admin = pier.ports!.admin;
  for (const path of ['/metrics', '/console/', '/admin/v1/status']) {
    const foreign = await get(admin, path, `evil.example:${admin}`);
    t.is(foreign.status, 403, path);
    t.is(JSON.parse(foreign.text).message, 'Host: this listener answers only loopback names, IP addresses and the names in PIER_ADMIN_HOSTS');
    for (const host of [`127.0.0.1:${admin}`, `localhost:${admin}`, 'pier-admin.internal']) t.is((await get(admin, path, host)).status, 200, `${path} as ${host}`);
  }
  t.is((await get(probePort, '/metrics', `evil.example:${probePort}`)).status, 403, 'the probe listener\'s /metrics too');
  t.is((await get(probePort, '/metrics', `127.0.0.1:${probePort}`)).status, 200);
});

test('S-3: a cross-origin sign-in flood is refused before any token is compared, and the operator\'s right token is never locked out, even by failures from the console\'s own origin', async (t) => {
  const admin = pier.ports!.admin;
  const signIn = async (token: string, origin: string | null, type = 'application/x-www-form-urlencoded') => {
    const r = await request(`http://127.0.0.1:${admin}/console/session`, {
      method: 'POST',
      headers: { host: `127.0.0.1:${admin}`, 'content-type': type, ...(origin ? { origin } : {}) },
      body: type.includes('json') ? JSON.stringify({ token }) : `token=${encodeURIComponent(token)}`,
    });
    await r.body.text();
    return r.statusCode;
  };
  const flood = await Promise.all(Array.from({ length: 30 }, (_, i) => signIn(`guess-${i}`, 'http://evil.example')));
  t.deepEqual([...new Set(flood)], [403], 'every cross-origin try refused');
  t.is(await signIn('guess', null), 403, 'a form without an Origin');
  t.is(await signIn(ADMIN, `http://127.0.0.1:${admin}`), 200, 'the operator signs in after the cross-origin flood');
  // Wrong tries from the console's own origin (another local process can make them): 401, then 429.
  const guesses: number[] = [];
  for (let i = 0; i < 25; i++) guesses.push(await signIn(`guess-${i}`, `http://127.0.0.1:${admin}`, 'application/json'));
  t.deepEqual(guesses, [...Array(20).fill(401), ...Array(5).fill(429)]);
  t.is(await signIn(ADMIN, `http://127.0.0.1:${admin}`, 'application/json'), 200, 'the right token, in the middle of the guessing');
});
