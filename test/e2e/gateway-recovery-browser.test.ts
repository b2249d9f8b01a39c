import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import type { AppEnv } from '../helpers/app-client.js';
import { findChromium } from '../helpers/chromium.js';
import { Broadcaster, openGatewayPage, serveGatewayPage, stateIs, type GatewayPage } from '../helpers/gateway-page.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { launchChromium } from '../helpers/playwright.js';
import { until, within } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';

/**
 * Gateway history and recovery (docs/gateway.md "History and recovery") in Debian's headless
 * Chromium, driven by playwright-core: a page using the SDK's connectGateway as an app ships it,
 * against one `pier start`. The page's network goes away (playwright's setOffline) while the app
 * goes on broadcasting; it comes back and shows every message once and in order, or, past the
 * history's bounds, is told it cannot (recovered: false) and gets no partial replay.
 *
 * How the page loses its connection: Chromium 150's offline emulation does not close an open
 * WebSocket, it holds its frames (both ways) until the network is back. So, as on a real dead
 * network, it is the SDK's keep-alive that finds the connection dead (no pong: close 4100) and
 * reconnects; the page uses a quick keep-alive (test/helpers/gateway-page.ts, QUICK) so that takes
 * about two seconds. Its reconnects fail until the network is back.
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log('gateway-recovery-browser: skipped — no chromium (as root, `npm test` installs Debian\'s package; otherwise `apt-get install -y chromium`)');
const maybe = chromiumPath ? test.serial : test.skip;

let dir: string;
let pier: PierProcess;
let backend: WsApp;
let token: string;
let browser: Browser | undefined;
let pages: { port: number; close(): Promise<void> } | undefined;
const apps: Record<string, AppEnv> = {};

const localUrl = () => `http://127.0.0.1:${pier.ports!.local}`;

async function install(env: Record<string, string>, name: string, history = ''): Promise<AppEnv> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `metadata: { name: ${name} }\noptions:\n  websocket: { url: /ws/message, port: ${backend.port}${history} }\n`);
  const r = await cli(['app', 'install', '--user', 'alice', '--manifest', file, '--json'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.json.env;
}

/** One broadcast to alice by `app`: Pier's answer. */
async function send(app: AppEnv, payload: unknown): Promise<{ status: number; data: { delivered: number; kept: boolean; offset?: number } }> {
  const res = await fetch(`${localUrl()}/runtime/ws/conn/send`, {
    method: 'POST',
    headers: { 'x-app-key': app.OS_APP_KEY, 'x-app-secret': app.OS_APP_SECRET, 'content-type': 'application/json' },
    body: JSON.stringify({ users: ['alice'], payload }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, data: ((await res.json()) as { data: { delivered: number; kept: boolean; offset?: number } }).data };
}

test.before(async () => {
  if (!chromiumPath) return;
  dir = tempDir('pier-recovery-browser-');
  backend = await WsApp.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  apps.live = await install(env, 'live');
  apps.short = await install(env, 'short', ', history: { messages: 2 }');
  pages = await serveGatewayPage(pier.ports!.public);
  browser = await launchChromium(chromiumPath);
});

test.after.always(async () => {
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`gateway-recovery-browser: ${err.message}`));
  await pages?.close().catch(() => undefined);
  await within('Pier to stop', pier?.stop() ?? Promise.resolve(null), 20_000).catch((err: Error) => console.log(`gateway-recovery-browser: ${err.message}`));
  await backend?.stop();
  if (dir) cleanup(dir);
});

test.afterEach.always((t) => {
  if (!t.passed && pier) t.log(pier.report());
});

/** In the page: how many messages its handler was handed. */
const messageCount = () => (window as any).__seen.messages.length as number;

/** Takes the page offline and waits until its SDK found the connection dead and is reconnecting. */
async function goOffline(p: GatewayPage): Promise<void> {
  await within('the page to go offline', p.context.setOffline(true));
  await p.waitFor('the SDK to find the connection dead (no pong) and reconnect', stateIs, 'reconnecting', 15_000);
}

maybe('offline under a steady broadcast: back online, the page shows every message once, in order, and was told it recovered what it missed', async (t) => {
  const p = await openGatewayPage(browser!, 'live.alice.localhost', pages!.port, token);
  t.teardown(() => p.context.close());
  const caster = new Broadcaster(localUrl, apps.live, 'alice', 50);
  let keptWhileAway = 0;
  try {
    await p.waitFor('a few live messages', (n) => (window as any).__seen.messages.length >= n, 5, 10_000);
    await goOffline(p);
    const away = caster.sent.length;
    const shownWhenAway = await within('the page to count its messages', p.page.evaluate(messageCount));
    keptWhileAway = await until('ten broadcasts kept while the page is away', () => {
      const kept = caster.kept.filter((b) => b.n >= away).length;
      return kept >= 10 && kept;
    });
    t.is(await within('the page to count its messages', p.page.evaluate(messageCount)), shownWhenAway, 'nothing reached the page while it was offline');
    await within('the page to go online', p.context.setOffline(false));
    await p.waitFor('the page to reconnect and get its recovery event', () => (window as any).__seen.recoveries.length === 2, undefined, 15_000);
    const back = caster.sent.length;
    await until('five more broadcasts after the page came back', () => caster.sent.length >= back + 5);
  } finally {
    await caster.stop();
  }
  const sent = caster.sent;
  t.deepEqual(sent.filter((b) => b.status !== 200 || b.kept !== true), [], 'every broadcast answered and kept');
  const offsets = sent.map((b) => b.offset!);
  t.deepEqual([...offsets].sort((x, y) => x - y), offsets, 'offsets grow with each broadcast');
  const last = sent.at(-1)!.n;
  await p.waitFor('the last broadcast to reach the page', (n) => (window as any).__seen.messages.some((m: { n: number }) => m.n === n), last, 15_000);
  const seen = await p.seen();
  t.deepEqual(
    seen.messages.map((m) => (m as { n: number }).n),
    sent.map((b) => b.n),
    'every broadcast handed to the page once, in order',
  );
  t.deepEqual(await p.rendered(), sent.map((b) => JSON.stringify({ n: b.n })), 'and rendered once, in order');
  t.is(seen.recoveries.length, 2);
  t.like(seen.recoveries[0], { recovered: false, reason: 'new' });
  const recovery = seen.recoveries[1];
  t.true(recovery.recovered, JSON.stringify(recovery));
  t.true(recovery.missed >= keptWhileAway, `missed ${recovery.missed}: at least the ${keptWhileAway} kept while the page was away`);
  t.is(seen.closes[0]?.code, 4100, 'the SDK\'s keep-alive dropped the dead connection');
  t.true(seen.closes.every((c) => c.reconnecting), 'no close was final');
  const position = await within('the page to tell its position', p.page.evaluate(() => (window as any).__conn.position));
  t.is(position?.offset, offsets.at(-1), 'the page stands at the last message');
  t.deepEqual(p.console.filter((l) => l.startsWith('exception')), []);
});

maybe('offline past the history\'s bounds (messages: 2, five missed): the page is told recovered: false (gap) and gets none of them, then live ones', async (t) => {
  const p = await openGatewayPage(browser!, 'short.alice.localhost', pages!.port, token);
  t.teardown(() => p.context.close());
  const first = await send(apps.short, { n: 0 });
  t.like(first, { status: 200, data: { kept: true } });
  await p.waitFor('the first message', (n) => (window as any).__seen.messages.length === n, 1);
  await goOffline(p);
  for (let n = 1; n <= 5; n++) t.like(await send(apps.short, { n }), { status: 200, data: { kept: true } }, `broadcast ${n} kept`);
  await within('the page to go online', p.context.setOffline(false));
  await p.waitFor('the page to reconnect and get its recovery event', () => (window as any).__seen.recoveries.length === 2, undefined, 15_000);
  const live = await send(apps.short, { n: 6 });
  t.like(live, { status: 200, data: { kept: true } });
  await p.waitFor('the live message after the reconnect', (n) => (window as any).__seen.messages.some((m: { n: number }) => m.n === n), 6);
  const seen = await p.seen();
  t.like(seen.recoveries[1], { recovered: false, reason: 'gap', missed: 0 });
  t.deepEqual(seen.messages, [{ n: 0 }, { n: 6 }], 'no partial replay, no duplicate');
  t.deepEqual(await p.rendered(), ['{"n":0}', '{"n":6}']);
  const state = await within('the page to tell its connection', p.page.evaluate(() => ({ recovered: (window as any).__conn.recovered, position: (window as any).__conn.position })));
  t.is(state.recovered, false, 'connectGateway exposes recovered: false');
  t.is(state.position?.offset, live.data.offset, 'and stands at the live message');
  t.deepEqual(p.console.filter((l) => l.startsWith('exception')), []);
});
