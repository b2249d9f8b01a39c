import test from 'ava';
import { cli } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';
import { readFileSync } from 'node:fs';
import { connect, refusal } from '../helpers/ws-client.js';
import { gatewayFixture, type GatewayFixture } from '../helpers/ws-setup.js';

// Hostile input to the WebSocket gateway against the real process (issue "Hardening", items 1 and 6).
let fx: GatewayFixture;

test.before(async () => {
  fx = await gatewayFixture();
});

test.after.always(async () => {
  await fx?.teardown();
});

const healthy = async () => (await fetch(`http://127.0.0.1:${fx.pier.ports!.public}/healthz`)).status === 200;

test.serial('a frame nested 6,000 levels deep is forwarded raw; the process and the connection live on', async (t) => {
  const c = await connect(fx.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': fx.token });
  const deep = `{"event":"x","data":${'['.repeat(6000)}${']'.repeat(6000)}}`;
  t.true(deep.length > 12_000);
  c.ws.send(deep);
  c.ws.send('{"event":"after","data":{}}');
  await until('both frames at the app', () => fx.app.accepted.some((k) => (k.body.data as { event?: string }).event === 'after'));
  const forwarded = fx.app.accepted.find((k) => k.body.action === 'message' && (k.body.data as { event?: string }).event === '');
  t.deepEqual(forwarded?.body.data, { event: '', data: { raw: deep } });
  t.true(await healthy());
  t.is(c.ws.readyState, c.ws.OPEN);
  t.true(fx.pier.proc.exitCode === null && fx.pier.proc.signalCode === null, `the process is up: ${fx.pier.stderr}`);
  c.ws.close();
});

test.serial('revoking the user closes her open connections with 4004, and the app gets their close', async (t) => {
  const c = await connect(fx.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': fx.token });
  const opened = await until('the open callback', () => fx.app.accepted.filter((k) => k.body.action === 'open').at(-1));
  const revoked = await cli(['user', 'revoke', 'alice'], { ...fx.pier.env, PIER_ADMIN_URL: fx.pier.adminUrl });
  t.is(revoked.code, 0, revoked.stderr);
  const closed = await Promise.race([c.closed, new Promise<null>((r) => setTimeout(() => r(null), 5_000))]);
  t.is(closed?.code, 4004, 'closed with 4004 within the deadline');
  await until('the close callback', () => fx.app.of(opened.body.conn_id).some((k) => k.body.action === 'close'));
  t.true(await healthy());
});

/** Resident memory of a process, from /proc (Linux). */
function rssBytes(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1];
  return Number(kb) * 1024;
}

test.serial('an app that is down: a connection flooding frames is closed with 4009, its close still queued; memory stays bounded', async (t) => {
  const down = await gatewayFixture({ PIER_WS_CONNS_PER_USER: '3' }, { fail: () => true });
  try {
    const c = await connect(down.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': down.token });
    const before = rssBytes(down.pier.proc.pid!);
    const frame = JSON.stringify({ event: 'flood', data: { blob: 'x'.repeat(60_000) } });
    for (let i = 0; i < 1000 && c.ws.readyState === c.ws.OPEN; i++) c.ws.send(frame);
    const closed = await Promise.race([c.closed, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
    t.is(closed?.code, 4009, 'closed with 4009 within the deadline');
    const grown = rssBytes(down.pier.proc.pid!) - before;
    t.true(grown < 48 * 1024 * 1024, `RSS grew by ${Math.round(grown / 1024 / 1024)} MiB for up to 60 MB sent`);
    t.true((await fetch(`http://127.0.0.1:${down.pier.ports!.public}/healthz`)).status === 200);

    // Per-user cap on this gateway: the 4th connection of alice is refused with 429.
    const open = await Promise.all([1, 2, 3].map(() => connect(down.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': down.token })));
    t.is(await refusal(down.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': down.token }), 429);
    open[0].ws.close();
    await within('the first connection to close', open[0].closed);
    await until('a place freed by a close', async () => (await refusal(down.pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': down.token })) === 101);
    for (const o of open) o.ws.close();
  } finally {
    await down.teardown();
  }
});
