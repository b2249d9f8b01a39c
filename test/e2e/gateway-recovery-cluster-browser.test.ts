import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import type { AppEnv } from '../helpers/app-client.js';
import { findChromium } from '../helpers/chromium.js';
import { Broadcaster, openGatewayPage, serveGatewayPage } from '../helpers/gateway-page.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { launchChromium } from '../helpers/playwright.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { until, within } from '../helpers/wait.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';

/**
 * Gateway history and recovery in a real browser across edges (docs/gateway.md "History and
 * recovery"), in the cluster shape of gateway-history-cluster.test.ts: every role its own process
 * and NATS identity, edges without the master key (PIER_HISTORY_KEY), history on JetStream. A page
 * in Debian's headless Chromium (playwright-core) uses the SDK's connectGateway through a TCP proxy
 * standing in for the load balancer in front of the edges (test/helpers/tcp-proxy.ts). The app
 * broadcasts to the user all along through the other edge, and through the page's own edge too until
 * it is gone. The page's edge is drained (SIGTERM: close 1001) or killed (-9: the connection just
 * ends); for a moment the balancer has no edge for the page (its reconnects are refused), so that
 * broadcasts are surely made while it is away; then it forwards to the other edge, where the page
 * recovers. Every broadcast Pier acknowledged as kept is shown once, in offset order.
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log('gateway-recovery-cluster-browser: skipped — no chromium (as root, `npm test` installs Debian\'s package; otherwise `apt-get install -y chromium`)');
const maybe = chromiumPath ? test.serial : test.skip;

let dir: string;
let bus: SecureBus;
let backend: WsApp;
let chat: AppEnv;
let token: string;
let proxy: TcpProxy;
let pages: { port: number; close(): Promise<void> };
let browser: Browser | undefined;
const masterKey = randomBytes(32).toString('hex');
const adminToken = randomBytes(24).toString('hex');
const edges: PierProcess[] = [];
const others: PierProcess[] = [];

const start = (role: string, name: string, extra: Record<string, string> = {}) =>
  PierProcess.start(
    pierEnv(join(dir, name), {
      ...bus.envFor(role),
      PIER_HEARTBEAT_MS: '250',
      PIER_PEER_DEAD_MS: '2000',
      ...(['registry', 'token', 'provider', 'vault'].includes(role) ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
      ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
      ...(role === 'edge' ? { PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' } : {}),
      ...extra,
    }),
    ['--roles', role],
  );

const localUrl = (edge: PierProcess) => `http://127.0.0.1:${edge.ports!.local}`;

/** Waits until `edge` knows the app and keeps its messages (a warm-up send to alice, while no page of hers is open). */
async function warmUp(edge: PierProcess, name: string): Promise<void> {
  await until(
    `${name} to know the app and keep history`,
    async () => {
      const res = await fetch(`${localUrl(edge)}/runtime/ws/conn/send`, { method: 'POST', headers: { 'x-app-key': chat.OS_APP_KEY, 'x-app-secret': chat.OS_APP_SECRET }, body: JSON.stringify({ users: ['alice'], payload: 'warm-up' }) });
      return ((await res.json()) as { data?: { kept?: boolean } }).data?.kept === true;
    },
    20_000,
    100,
  );
}

async function startEdge(name: string): Promise<PierProcess> {
  const edge = await start('edge', name);
  await warmUp(edge, name);
  return edge;
}

test.before(async () => {
  if (!chromiumPath) return;
  dir = tempDir('pier-recovery-cluster-browser-');
  bus = await SecureBus.start(dir, {}, { jetstream: true });
  backend = await WsApp.start();
  others.push(await start('registry', 'registry'), await start('callback', 'callback'));
  edges.push(await start('edge', 'edge1'), await start('edge', 'edge2'));
  others.push(await start('admin', 'admin', { PIER_SYSTEM_URL: `127.0.0.1:${edges[0].ports!.system}` }));
  const env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: others[2].adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', backend.port));
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  chat = installed.json.env;
  for (const [i, e] of edges.entries()) await warmUp(e, `edge${i + 1}`);
  proxy = await TcpProxy.start([]);
  pages = await serveGatewayPage(proxy.port);
  browser = await launchChromium(chromiumPath);
});

test.after.always(async () => {
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`gateway-recovery-cluster-browser: ${err.message}`));
  await pages?.close().catch(() => undefined);
  await proxy?.close().catch(() => undefined);
  await Promise.all([...edges, ...others].map((p) => p.stop('SIGKILL')));
  await backend?.stop();
  await bus?.stop();
  if (dir) cleanup(dir);
});

test.afterEach.always((t) => {
  if (!t.passed) for (const e of edges) t.log(e.report());
});

/** A message's key: the sender's tag and its number. */
const keyOf = (m: { s?: string; n: number }) => `${m.s}${m.n}`;

/**
 * The page connects through the proxy to `from`; the app broadcasts all along through `via` (sender
 * `v`) and, as a second replica of it, through `from` (sender `f`) until that edge is gone; `away`
 * takes `from` down and answers once the page lost its connection; the proxy refuses the page until
 * ten broadcasts were kept meanwhile, then forwards it to `via`. Asserts the page showed every
 * broadcast Pier acknowledged as kept once, in the order of their offsets (a message sent through the
 * dying edge whose answer was lost may be shown too, once), and that it recovered.
 */
async function survives(t: ExecutionContext, from: PierProcess, via: PierProcess, away: () => Promise<unknown>, closeCode: number): Promise<void> {
  proxy.targets = [from.ports!.public];
  const p = await openGatewayPage(browser!, 'chat.alice.localhost', pages.port, token);
  t.teardown(() => p.context.close());
  t.is(proxy.forwarded.at(-1), from.ports!.public, 'the page is on the edge that goes away');
  const steady = new Broadcaster(() => localUrl(via), chat, 'alice', 50, 'v');
  const doomed = new Broadcaster(() => localUrl(from), chat, 'alice', 50, 'f');
  let keptWhileAway = 0;
  try {
    await p.waitFor('five live messages from each sender', () => ['v', 'f'].every((s) => (window as any).__seen.messages.filter((m: { s: string }) => m.s === s).length >= 5), undefined, 10_000);
    proxy.targets = [];
    await away();
    await p.waitFor('the page to lose its connection', () => (window as any).__seen.closes.length >= 1, undefined, 15_000);
    const gone = steady.sent.length;
    keptWhileAway = await until('ten broadcasts kept while the page is away', () => {
      const kept = steady.kept.filter((b) => b.n >= gone).length;
      return kept >= 10 && kept;
    });
    await doomed.stop();
    proxy.targets = [via.ports!.public];
    await p.waitFor('the page to reconnect to the other edge and get its recovery event', () => (window as any).__seen.recoveries.length === 2, undefined, 15_000);
    const back = steady.sent.length;
    await until('five more broadcasts after the page came back', () => steady.sent.length >= back + 5);
  } finally {
    await Promise.all([steady.stop(), doomed.stop()]);
  }
  t.is(proxy.forwarded.at(-1), via.ports!.public, 'the page came back through the other edge');
  t.deepEqual(steady.sent.filter((b) => b.status !== 200 || b.kept !== true), [], 'every broadcast through the edge that stayed answered and kept');
  t.deepEqual(doomed.sent.filter((b) => b.status === 200 && b.kept !== true), [], 'every broadcast the edge that went answered was kept');
  t.true(doomed.kept.length > 0, 'broadcasts were kept through the edge that went');
  const kept = [...steady.kept, ...doomed.kept].sort((x, y) => x.offset! - y.offset!);
  t.is(new Set(kept.map((b) => b.offset)).size, kept.length, 'no two broadcasts kept at one offset');
  const unanswered = new Set(doomed.sent.filter((b) => b.status !== 200).map(keyOf));
  await p.waitFor('the last broadcast to reach the page', (n) => (window as any).__seen.messages.some((m: { s: string; n: number }) => m.s === 'v' && m.n === n), steady.sent.at(-1)!.n, 15_000);
  const seen = await p.seen();
  const shown = seen.messages.map((m) => keyOf(m as { s: string; n: number }));
  const lost = doomed.sent.filter((b) => b.status !== 200);
  t.log(`through the edge that went: ${doomed.kept.length} kept, ${lost.length} unanswered (${[...new Set(lost.map((b) => b.error ?? b.status))].join('; ')}), ${shown.filter((k) => unanswered.has(k)).length} of them shown; the recovery: ${JSON.stringify(seen.recoveries[1])}`);
  t.is(new Set(shown).size, shown.length, 'nothing shown twice');
  t.deepEqual(shown.filter((k) => !unanswered.has(k)), kept.map(keyOf), 'every kept broadcast shown, in offset order; nothing else but a send whose answer was lost');
  t.deepEqual(await p.rendered(), seen.messages.map((m) => JSON.stringify(m)), 'rendered as handed');
  t.is(seen.closes[0]?.code, closeCode);
  t.true(seen.closes.every((c) => c.reconnecting), 'no close was final');
  t.is(seen.recoveries.length, 2);
  const recovery = seen.recoveries[1];
  t.true(recovery.recovered, JSON.stringify(recovery));
  t.true(recovery.missed >= keptWhileAway, `missed ${recovery.missed}: at least the ${keptWhileAway} kept while the page was away`);
  t.deepEqual(p.console.filter((l) => l.startsWith('exception')), []);
}

maybe('the page\'s edge drained (SIGTERM, 1001): the page recovers on the other edge and shows every kept broadcast once, in order', async (t) => {
  const [draining, other] = edges;
  let stopped: Promise<number | null> = Promise.resolve(null);
  await survives(t, draining, other, async () => (stopped = draining.stop('SIGTERM')), 1001);
  await within('the drained edge to exit', stopped, 20_000);
});

maybe('the page\'s edge killed (-9): the page recovers on the other edge and shows every kept broadcast once, in order', async (t) => {
  // Two edges again (the last test's page is closed: the warm-up reaches no page).
  edges[0] = await startEdge('edge3');
  const [other, victim] = edges;
  await survives(t, victim, other, () => victim.stop('SIGKILL'), 1006);
});
