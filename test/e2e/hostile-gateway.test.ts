import test from 'ava';
import { cli } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';
import { connect } from '../helpers/ws-client.js';
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
