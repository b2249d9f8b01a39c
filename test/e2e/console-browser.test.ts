import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { request } from 'undici';
import { accessToken, callProvider, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { findChromium } from '../helpers/chromium.js';
import { startConsoleCluster, type ConsoleCluster } from '../helpers/console-cluster.js';
import { CONSOLE_WIDE, launchChromium, shootAtBothWidths } from '../helpers/playwright.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { TusRaw } from '../helpers/tus-raw.js';
import { until, within } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';
import { connect, type Client } from '../helpers/ws-client.js';

/**
 * The operator console (docs/operations.md "Console") in Debian's headless Chromium driven by
 * playwright-core, against Pier as several processes on one NATS (test/helpers/console-cluster.ts):
 * sign in with the admin token, add a user (token shown once), install apps from pasted documents,
 * close a live WebSocket connection, watch a tus upload's progress, read and filter the vault audit,
 * suspend and resume a provider, see the charts drawn at sign-in from the samples kept since the
 * admin process started (their legend at the latest values) and app-facing traffic in them, see a
 * client's refusal leave a process answering, and see a killed process drop out of the processes
 * view; a wrong token, an expired session and cross-site or token-less changes are refused. Screenshots of every view at 1280 and 390 px go to PIER_SCREENSHOTS_DIR (kept) or to the
 * test's temp dir (removed).
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log("console-browser: skipped — no chromium (as root, `npm test` installs Debian's package; otherwise `apt-get install -y chromium`)");
const maybe = chromiumPath ? test.serial : test.skip;

const MiB = 1024 * 1024;
const WIDE = CONSOLE_WIDE;
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };
const PROVIDER = 'provider-notes-alice';
const SESSION_COOKIE = 'pier_console';

let cluster: ConsoleCluster | undefined;
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
let wsApp: WsApp | undefined;
let upstream: ProviderServer | undefined;
let attacker: Server | undefined;
let shotsDir: string;
const sockets: Client[] = [];
/** Every window.confirm the console's page asked, in order (each accepted). */
const dialogs: string[] = [];
/** The page's console lines and uncaught exceptions, for a failing test's message. */
const pageLog: string[] = [];

let userToken = '';
const apps: Record<string, AppEnv> = {};

const adminUrl = () => cluster!.main.adminUrl;

test.before(async () => {
  if (!chromiumPath) return;
  cluster = await startConsoleCluster({ spareSessionMs: 3_000 });
  shotsDir = resolve(process.env.PIER_SCREENSHOTS_DIR ?? join(cluster.dir, 'screenshots'));
  mkdirSync(shotsDir, { recursive: true });
  wsApp = await WsApp.start();
  upstream = await ProviderServer.start();
  browser = await launchChromium(chromiumPath);
  context = await within('a browser context', browser.newContext({ viewport: WIDE }));
  context.setDefaultTimeout(15_000);
  page = await within('a page', context.newPage());
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  page.on('console', (m) => pageLog.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`exception: ${e.message}`));
});

test.after.always(async () => {
  for (const s of sockets) s.ws.terminate();
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`console-browser: ${err.message}`));
  if (attacker) {
    attacker.closeAllConnections();
    await within('the attacker page server to close', new Promise((r) => attacker!.close(r))).catch(() => undefined);
  }
  await wsApp?.stop();
  await upstream?.stop();
  await cluster?.stop();
});

/** Adds the page's last console lines to a failing test's log. */
function explain(t: ExecutionContext): void {
  t.teardown(() => {
    if (!t.passed) t.log(`page console (last 10): ${pageLog.slice(-10).join(' | ') || '(nothing)'}`);
  });
}

/** A GET of the admin API with the admin token, as the CLI makes it. */
async function adminGet(path: string): Promise<{ status: number; text: string; json: any }> {
  const res = await request(`${adminUrl()}${path}`, { headers: { authorization: `Bearer ${cluster!.adminToken}` } });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, text, json };
}

const userNames = async (): Promise<string[]> => (await adminGet('/admin/v1/users')).json.data.map((u: { name: string }) => u.name);

/** Clicks the view's link in the navigation and waits for its heading. */
async function show(p: Page, title: string): Promise<void> {
  await p.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: title, exact: true }).click();
  await p.waitForFunction((name) => document.getElementById('view-title')?.textContent === name, title, { timeout: 10_000 }).catch((err: Error) => {
    throw new Error(`waiting for the ${title} view's heading: ${err.message.split('\n')[0]}`);
  });
}

/** Screenshots at both widths into the run's folder (test/helpers/playwright.ts). */
const shoot = (p: Page, name: string, ready?: () => Promise<unknown>) => shootAtBothWidths(p, shotsDir, name, ready);

/** The text of each cell of the rows matching `selector`. */
const cellsOf = (p: Page, selector: string): Promise<string[][]> => p.locator(selector).evaluateAll((rows) => rows.map((r) => [...(r as HTMLTableRowElement).cells].map((c) => (c.textContent ?? '').trim())));

/** The route of the system listener's POST /permission/v1alpha1/access in the metrics history (`<listener> <METHOD path>`). */
const ACCESS_ROUTE = 'system POST /permission/v1alpha1/access';

/**
 * App-facing traffic, as an app's requests are counted: `n` POSTs to the system listener's access
 * route with a body that is no access request (each refused with a 4xx, and counted).
 */
async function appTraffic(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await request(`http://127.0.0.1:${cluster!.main.ports!.system}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"not":"an access request"}' });
    await r.body.dump();
    if (r.statusCode < 400 || r.statusCode >= 500) throw new Error(`the system listener answered a bad access request ${r.statusCode}`);
  }
}

interface HistorySample {
  at: number;
  routes: Record<string, number>;
}

/** The metrics history (admin API, admin token) once `ok` holds of its samples; waited for with a deadline. */
async function historyWhen(what: string, ok: (samples: HistorySample[]) => boolean): Promise<{ every_ms: number; samples: HistorySample[] }> {
  return until(
    what,
    async () => {
      const h = (await adminGet('/admin/v1/metrics/history')).json?.data;
      return h && ok(h.samples) ? h : undefined;
    },
    20_000,
    100,
  );
}

/** The routes chart's legend, a row per series (the first is the time): its label and the value it shows. */
const routesLegend = (p: Page): Promise<{ label: string; value: string }[]> =>
  p.locator('figure[data-chart="routes"] .u-legend .u-series').evaluateAll((rows) => rows.map((r) => ({ label: (r.querySelector('.u-label')?.textContent ?? '').trim(), value: (r.querySelector('.u-value')?.textContent ?? '').trim() })));

/** A rate as uPlot's legend writes a number (in the browser's locale): not `--`, uPlot's "no value here". */
const NUMBER = /^-?[\d.,\u00a0\u202f]+$/;

/** Signs in on the sign-in form of `p`. */
async function signIn(p: Page, token: string): Promise<void> {
  await p.getByLabel('Admin token').fill(token);
  await p.getByRole('button', { name: 'Sign in' }).click();
}

maybe('sign-in: a wrong token is refused with an error and no session; the admin token opens an HttpOnly, SameSite=Strict session', async (t) => {
  t.timeout(60_000);
  explain(t);
  await page.goto(`${adminUrl()}/console/`, { timeout: 20_000 });
  await page.getByLabel('Admin token').waitFor();
  t.is(await page.getByLabel('Admin token').getAttribute('type'), 'password');
  t.is(await page.locator('#signin-help').textContent(), 'The token in PIER_ADMIN_TOKEN (or <data dir>/admin.token). It is sent once; the console keeps a session cookie, not the token.');
  await shoot(page, 'signin');

  await signIn(page, `not-the-token-${randomBytes(8).toString('hex')}`);
  const alert = page.getByRole('alert');
  await alert.waitFor();
  t.is(await alert.textContent(), 'That is not the admin token.');
  t.false((await context.cookies()).some((c) => c.name === SESSION_COOKIE), 'no session cookie');
  t.is(await page.getByRole('navigation', { name: 'Views' }).count(), 0, 'still on the sign-in page');

  // The history is sampled from the admin process's start, whether anyone is signed in or not: by
  // now it holds samples, app-facing traffic in them (the next test opens the charts on them).
  await appTraffic(10);
  await historyWhen(`two samples or more before sign-in, one with ${ACCESS_ROUTE}`, (samples) => samples.length >= 2 && samples.some((s) => ACCESS_ROUTE in s.routes));

  await signIn(page, cluster!.adminToken);
  const nav = page.getByRole('navigation', { name: 'Views' });
  await nav.waitFor();
  for (const name of ['Processes', 'Users', 'Apps', 'Providers', 'Connections', 'Uploads', 'Secrets', 'Vault audit', 'Charts']) t.is(await nav.getByRole('link', { name, exact: true }).count(), 1, name);
  const cookie = (await context.cookies()).find((c) => c.name === SESSION_COOKIE);
  t.truthy(cookie, 'a session cookie');
  t.true(cookie!.httpOnly);
  t.is(cookie!.sameSite, 'Strict');
  t.true(cookie!.expires > Date.now() / 1000, 'it expires');
  t.false((await page.evaluate(() => document.cookie)).includes(SESSION_COOKIE), 'the page script cannot read it');
  const kept = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + location.href);
  t.false(kept.includes(cluster!.adminToken), 'the token is kept nowhere by the page');
  t.is(await page.getByLabel('Admin token').count(), 0);
});

maybe('charts at sign-in: drawn at once from the samples already kept, the legend at the latest values without hovering (and again once the cursor leaves)', async (t) => {
  t.timeout(60_000);
  explain(t);
  // Whatever the view shows from the moment it opens: it is never "Collecting the first samples…".
  await page.evaluate(() => {
    const w = window as unknown as { collecting: boolean; collectingWatch: MutationObserver };
    w.collecting = false;
    w.collectingWatch = new MutationObserver(() => {
      if (document.querySelector('main')?.textContent?.includes('Collecting the first samples')) w.collecting = true;
    });
    w.collectingWatch.observe(document.body, { childList: true, subtree: true, characterData: true });
  });
  const firstAnswer = page.waitForResponse((r) => new URL(r.url()).pathname === '/admin/v1/metrics/history', { timeout: 15_000 });
  await show(page, 'Charts');
  const first = (await (await firstAnswer).json()).data as { samples: HistorySample[] };
  t.true(first.samples.length >= 2, `the view's first answer holds samples (${first.samples.length})`);
  const drawn = await until('a uPlot canvas in every chart', async () => {
    const n = await page.locator('figure[data-chart] canvas').count();
    return n === CHARTS.length ? n : undefined;
  });
  t.is(drawn, CHARTS.length, 'each one drawn (uPlot canvas)');
  t.false(
    await page.evaluate(() => {
      const w = window as unknown as { collecting: boolean; collectingWatch: MutationObserver };
      w.collectingWatch.disconnect();
      return w.collecting || (document.querySelector('main')?.textContent ?? '').includes('Collecting the first samples');
    }),
    'the view never said "Collecting the first samples…": the charts came with its first answer',
  );
  t.deepEqual(await page.locator('figure[data-chart]').evaluateAll((els) => els.map((e) => e.getAttribute('data-chart'))), CHARTS);

  // No cursor over the chart: the legend shows the latest sample's values, not uPlot's "--".
  const shown = await routesLegend(page);
  t.true(shown.length >= 2, `a legend row per route (${JSON.stringify(shown)})`);
  t.true(shown.some((r) => r.label === ACCESS_ROUTE), `${ACCESS_ROUTE} in the legend: ${JSON.stringify(shown)}`);
  t.not(shown[0].value, '--', `the time of the latest sample (${shown[0].value})`);
  t.not(shown[0].value, '', 'the time of the latest sample');
  for (const r of shown.slice(1)) t.regex(r.value, NUMBER, `${r.label}: ${r.value}`);

  // The cursor over the chart shows the values there (uPlot's own); once it leaves, the latest again.
  const plot = page.locator('figure[data-chart="routes"] .u-over');
  await plot.hover({ position: { x: 2, y: 10 } });
  await until('the legend to follow the cursor', async () => ((await routesLegend(page))[0]?.value ?? '--') !== '--');
  await page.mouse.move(0, 0);
  const left = await until('the legend once the cursor left the chart', async () => {
    const rows = await routesLegend(page);
    return rows.length >= 2 && rows[0].value !== '' ? rows : undefined;
  });
  t.not(left[0].value, '--', 'the time of the latest sample, the cursor gone');
  for (const r of left.slice(1)) t.regex(r.value, NUMBER, `${r.label}, the cursor gone: ${r.value}`);
});

maybe('users: add one in the console; its token is shown once and its row appears', async (t) => {
  t.timeout(60_000);
  explain(t);
  await show(page, 'Users');
  const input = page.getByLabel('New user');
  // The form checks the name as the registry does (a pattern the browser can compile, and applies).
  await input.fill('Not_A_Name');
  t.true(await input.evaluate((el) => (el as HTMLInputElement).validity.patternMismatch), 'an invalid name is flagged by the form');
  await input.fill('alice');
  t.true(await input.evaluate((el) => (el as HTMLInputElement).validity.valid));
  await page.getByRole('button', { name: 'Add user' }).click();
  const shown = page.locator('output#new-token');
  await shown.waitFor();
  userToken = (await shown.textContent())!.trim();
  t.regex(userToken, /^pier_[A-Za-z0-9_-]{20,}$/);
  await page.locator('tr[data-user="alice"]').waitFor();
  t.deepEqual(await userNames(), ['alice'], 'the admin API agrees');
  // Shown once: the view again, the row still there, the token gone from the page.
  await show(page, 'Processes');
  await show(page, 'Users');
  await page.locator('tr[data-user="alice"]').waitFor();
  t.is(await page.locator('output#new-token').count(), 0);
  t.false((await page.content()).includes(userToken));
});

/** Installs an app through the Apps view's form; answers the environment it shows once. */
async function installInConsole(t: ExecutionContext, user: string, manifest: string, providerDocument = ''): Promise<{ env: AppEnv; uploadDir: string | null }> {
  const details = page.locator('details.panel');
  if (!(await details.evaluate((d) => (d as HTMLDetailsElement).open))) await page.getByText('Install an app', { exact: true }).click();
  await page.getByLabel('For user').fill(user);
  await page.getByLabel('PlatformManifest.yaml').fill(manifest);
  await page.getByLabel('ProviderRegistry document (optional)').fill(providerDocument);
  const name = /name: (\w+)/.exec(manifest)![1];
  await page.getByRole('button', { name: 'Install', exact: true }).click();
  const once = page.locator('div.once', { hasText: `${name} installed for ${user}` });
  await once.waitFor();
  const text = (await once.locator('output#installed-env').textContent())!;
  const env = Object.fromEntries(text.split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)])) as unknown as AppEnv;
  t.deepEqual(Object.keys(env).sort(), ['OS_APP_KEY', 'OS_APP_SECRET', 'OS_SYSTEM_SERVER']);
  const code = once.locator('code');
  return { env, uploadDir: (await code.count()) > 0 ? await code.textContent() : null };
}

const vaultGrant = (ws: string) =>
  `    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=${ws}, CreateSecret?workspace=${ws}, UpdateSecret?workspace=${ws}, DeleteSecret?workspace=${ws}, ListSecret?workspace=${ws}] }\n`;

maybe('apps: install from a pasted manifest (websocket, upload, grants) and a ProviderRegistry document; both listed', async (t) => {
  t.timeout(60_000);
  explain(t);
  await show(page, 'Apps');
  const notes = await installInConsole(
    t,
    'alice',
    `metadata: { name: notes, version: 2.0.0 }\npermission:\n  sysData:\n${vaultGrant('notes')}`,
    providerDoc('alice', PROVIDER, upstream!.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }),
  );
  apps.notes = notes.env;
  t.is(notes.uploadDir, null);
  const chat = await installInConsole(
    t,
    'alice',
    [
      'metadata: { name: chat, version: 1.2.3 }',
      'options:',
      `  websocket: { url: /ws/message, port: ${wsApp!.port} }`,
      'upload: { fileType: ["*"], dest: /dest }',
      'permission:',
      '  sysData:',
      vaultGrant('chat') + '    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }',
      '',
    ].join('\n'),
  );
  apps.chat = chat.env;
  t.truthy(chat.uploadDir, 'its upload folder on the host is named');
  t.true(statSync(chat.uploadDir!).isDirectory());

  const chatRow = page.locator('tr[data-app="alice/chat"]');
  const notesRow = page.locator('tr[data-app="alice/notes"]');
  await chatRow.waitFor();
  await notesRow.waitFor();
  // Columns: App (th), User, Version, Grants, Upload folder, Providers, Installed, actions.
  const [chatCells] = await cellsOf(page, 'tr[data-app="alice/chat"]');
  t.is(chatCells[0], 'chat');
  t.deepEqual(chatCells.slice(1, 3), ['alice', '1.2.3']);
  t.true(chatCells[3].includes('secret/secret.vault/v1') && chatCells[3].includes('legacy_notes/api.notes/v2'), chatCells[3]);
  t.is(chatCells[4], '/dest');
  const [notesCells] = await cellsOf(page, 'tr[data-app="alice/notes"]');
  t.is(notesCells[5], PROVIDER);
  const listed = (await adminGet('/admin/v1/apps')).json.data.map((a: { user: string; app: string }) => `${a.user}/${a.app}`).sort();
  t.deepEqual(listed, ['alice/chat', 'alice/notes']);
});

/** A WebSocket to alice's chat as a browser opens it (Host of the app, her token), once the edge knows the app. */
async function openSocket(agent: string): Promise<{ client: Client; connId: string }> {
  const before = new Set(wsApp!.accepted.map((c) => c.body.conn_id));
  const client = await until(
    'the gateway to accept a connection to chat.alice.localhost',
    () => connect(cluster!.main.ports!.public, 'chat.alice.localhost', { 'x-authorization': userToken, 'user-agent': agent }).catch(() => undefined),
    15_000,
    100,
  );
  sockets.push(client);
  const open = await until('the open callback at the app', () => wsApp!.accepted.find((c) => c.body.action === 'open' && !before.has(c.body.conn_id)));
  return { client, connId: open.body.conn_id };
}

maybe('connections: a live WebSocket appears in the view and is closed from the console; the client sees 4001', async (t) => {
  t.timeout(60_000);
  explain(t);
  const { client, connId } = await openSocket('console-test/1');
  await show(page, 'Connections');
  const row = page.locator(`tr[data-conn="${connId}"]`);
  await row.waitFor();
  // Columns: Connection (th), User, App, Edge, Client, actions.
  const [cells] = await cellsOf(page, `tr[data-conn="${connId}"]`);
  t.deepEqual(cells.slice(0, 3), [connId, 'alice', 'chat']);
  t.is(cells[4], 'console-test/1');
  t.not(cells[3], '?', 'the edge holding it is named');
  t.is(await page.locator('#partial').count(), 0, 'every edge answered');

  const asked = dialogs.length;
  await row.getByRole('button', { name: `Close connection ${connId}` }).click();
  const closed = await within('the client to see its connection closed', client.closed, 10_000);
  t.is(closed.code, 4001);
  t.is(dialogs.length, asked + 1, 'the close was confirmed');
  t.true(dialogs[asked].includes(connId) && dialogs[asked].includes('4001'), dialogs[asked]);
  await page.getByText(`Connection ${connId} closed.`).waitFor();
  await row.waitFor({ state: 'detached' });
});

/** The `<progress>` of an upload in the Uploads view: its value and max. */
const progressOf = (p: Page, id: string) =>
  p.locator(`li[data-upload="${id}"] progress`).evaluate((el) => ({ value: (el as HTMLProgressElement).value, max: (el as HTMLProgressElement).max })).catch(() => undefined);

maybe("uploads: a tus upload's progress is shown and moves as bytes arrive", async (t) => {
  t.timeout(60_000);
  explain(t);
  const tus = new TusRaw(cluster!.main.ports!.upload, 'chat.alice.localhost', userToken);
  const data = randomBytes(4 * MiB);
  const created = await until(
    'the upload listener to accept a tus creation for chat',
    async () => {
      const r = await tus.create(data.length, { filename: 'console.bin' });
      return r.status === 201 ? r : undefined;
    },
    15_000,
    100,
  );
  t.is((await tus.patch(created.id, 0, data.subarray(0, MiB))).status, 204);
  await show(page, 'Uploads');
  const item = page.locator(`li[data-upload="${created.id}"]`);
  await item.waitFor();
  const first = await until('the progress bar at 1 MiB', async () => {
    const p = await progressOf(page, created.id);
    return p && p.value === MiB ? p : undefined;
  });
  t.deepEqual(first, { value: MiB, max: 4 * MiB });
  t.true((await item.textContent())!.includes('(25 %)'));
  t.true((await item.textContent())!.includes('tus'));

  t.is((await tus.patch(created.id, MiB, data.subarray(MiB, 2 * MiB))).status, 204);
  const second = await until('the progress bar to move to 2 MiB', async () => {
    const p = await progressOf(page, created.id);
    return p && p.value === 2 * MiB ? p : undefined;
  });
  t.deepEqual(second, { value: 2 * MiB, max: 4 * MiB });
  t.true((await item.textContent())!.includes('(50 %)'));
  // (The upload stays half done: the screenshots show it in progress.)
});

/** Sets the audit view's filters and waits for the answer to that query. */
async function filterAudit(p: Page, f: { user?: string; app?: string; op?: string }): Promise<void> {
  const form = p.locator('form.inline');
  await form.getByLabel('User', { exact: true }).fill(f.user ?? '');
  await form.getByLabel('App', { exact: true }).fill(f.app ?? '');
  await form.getByLabel('Operation', { exact: true }).fill(f.op ?? '');
  const answered = p.waitForResponse((r) => {
    const q = new URL(r.url()).searchParams;
    return r.url().includes('/admin/v1/vault/audit') && (q.get('user') ?? '') === (f.user ?? '') && (q.get('app') ?? '') === (f.app ?? '') && (q.get('op') ?? '') === (f.op ?? '');
  });
  await form.getByRole('button', { name: 'Filter' }).click();
  const r = await answered;
  if (r.status() !== 200) throw new Error(`the audit query answered ${r.status()}`);
}

/** The audit rows without their time: User, App, Operation, Workspace, Secret, Outcome. */
const auditRows = async (p: Page) => (await cellsOf(p, 'tr.audit-entry')).map((cells) => cells.slice(1));

maybe('vault audit: entries of app calls shown, filtered by user, app and op; never a value', async (t) => {
  t.timeout(60_000);
  explain(t);
  const secret = `console-secret-${randomBytes(12).toString('hex')}`;
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const chat = { user: userToken, access: await accessToken(apps.chat, vaultPerm('chat')) };
  t.is((await vaultCall(sys, 'CreateSecret', 'chat', chat, { name: 'console.key', value: secret, env: 'prod' })).status, 200);
  t.is((await vaultCall(sys, 'RetrieveSecret', 'chat', chat, { name: 'console.key', env: 'prod' })).json.data.data.value, secret);
  const notes = { user: userToken, access: await accessToken(apps.notes, vaultPerm('notes')) };
  t.is((await vaultCall(apps.notes.OS_SYSTEM_SERVER, 'ListSecret', 'notes', notes, { env: 'prod' })).status, 200);

  await show(page, 'Vault audit');
  const all = [
    ['alice', 'notes', 'ListSecret', 'notes (prod)', '–', 'ok'],
    ['alice', 'chat', 'RetrieveSecret', 'chat (prod)', 'console.key', 'ok'],
    ['alice', 'chat', 'CreateSecret', 'chat (prod)', 'console.key', 'ok'],
  ];
  const expectRows = async (what: string, expected: string[][]) => {
    const rows = await until(what, async () => {
      const r = await auditRows(page);
      return JSON.stringify(r) === JSON.stringify(expected) ? r : undefined;
    });
    t.deepEqual(rows, expected, what);
  };
  await expectRows('the three entries, newest first', all);
  await filterAudit(page, { app: 'chat' });
  await expectRows('the entries of app chat', all.slice(1));
  await filterAudit(page, { op: 'RetrieveSecret' });
  await expectRows('the RetrieveSecret entry', [all[1]]);
  await filterAudit(page, { user: 'alice', app: 'notes', op: 'ListSecret' });
  await expectRows('the ListSecret entry of notes', [all[0]]);
  await filterAudit(page, { user: 'bob' });
  await expectRows('no entry of user bob', []);
  await filterAudit(page, { user: 'alice' });
  await expectRows("alice's entries", all);

  t.false((await page.content()).includes(secret), 'no value on the page');
  t.false((await adminGet('/admin/v1/vault/audit?limit=1000')).text.includes(secret), 'no value in what the page is given');
});

/** The state cell of the provider's row. */
const providerState = (p: Page) => p.locator(`tr[data-provider="${PROVIDER}"] td`).nth(2).textContent({ timeout: 5_000 }).catch(() => undefined);

maybe('providers: suspend (confirmed) and resume from the console; calls to it follow', async (t) => {
  t.timeout(60_000);
  explain(t);
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const token = await accessToken(apps.chat, { ...NOTES, ops: ['echo'] });
  const callStatus = async () => (await callProvider(sys, 'legacy_notes/api.notes/v2/echo', token)).status;
  t.is(await callStatus(), 201, 'the provider answers while active');

  await show(page, 'Providers');
  const row = page.locator(`tr[data-provider="${PROVIDER}"]`);
  await row.waitFor();
  // Columns: Provider (th), App, Serves, State, actions.
  const [cells] = await cellsOf(page, `tr[data-provider="${PROVIDER}"]`);
  t.deepEqual(cells.slice(0, 4), [PROVIDER, 'alice/notes', 'legacy_notes/api.notes/v2', 'active']);

  const asked = dialogs.length;
  await row.getByRole('button', { name: `Suspend ${PROVIDER}` }).click();
  t.is(await until('the state "suspended" in the view', async () => ((await providerState(page)) === 'suspended' ? 'suspended' : undefined)), 'suspended');
  t.is(dialogs.length, asked + 1, 'the suspension was confirmed');
  t.true(dialogs[asked].includes(PROVIDER), dialogs[asked]);
  t.is((await adminGet('/admin/v1/providers')).json.data.find((p: { name: string }) => p.name === PROVIDER).state, 'suspended');
  const refused = await until('the suspension to reach the provider actor', async () => {
    const s = await callStatus();
    return s === 201 ? undefined : s;
  });
  t.is(refused, 404, 'a suspended provider is not called (docs/provider-calls.md)');

  await row.getByRole('button', { name: `Resume ${PROVIDER}` }).click();
  t.is(await until('the state "active" in the view', async () => ((await providerState(page)) === 'active' ? 'active' : undefined)), 'active');
  t.is(dialogs.length, asked + 1, 'a resume asks nothing');
  const answered = await until('the resume to reach the provider actor', async () => {
    const s = await callStatus();
    return s === 404 ? undefined : s;
  });
  t.is(answered, 201);
});

const CHARTS = ['http_requests_per_s', 'http_p99_ms', 'ws_messages_per_s', 'callback_retries_per_s', 'bus_refusals_per_s', 'routes'];

maybe('charts: once two samples exist, a chart per figure', async (t) => {
  t.timeout(60_000);
  explain(t);
  await show(page, 'Charts');
  await page.locator('figure[data-chart]').first().waitFor({ timeout: 20_000 });
  const keys = await page.locator('figure[data-chart]').evaluateAll((els) => els.map((e) => e.getAttribute('data-chart')));
  t.deepEqual(keys, CHARTS);
  // A figure is in the page before uPlot draws into it (the next sample): waited for, with a deadline.
  const drawn = await until('a uPlot canvas in every chart', async () => {
    const n = await page.locator('figure[data-chart] canvas').count();
    return n === CHARTS.length ? n : undefined;
  });
  t.is(drawn, CHARTS.length, 'each one drawn (uPlot canvas)');
  const history = (await adminGet('/admin/v1/metrics/history')).json.data;
  t.true(history.samples.length >= 2);
  t.is(history.every_ms, 500);
  // What apps ask of Pier, not the console's own polls of the admin API: app-facing requests now
  // show up in a sample, and then as a line of the routes chart.
  const since = Date.now();
  await appTraffic(30);
  const after = await historyWhen(`a sample after the app-facing requests with a system route (${ACCESS_ROUTE})`, (samples) => samples.some((s) => s.at > since && ACCESS_ROUTE in s.routes));
  t.true(after.samples.some((s) => Object.keys(s.routes).some((r) => r.startsWith('system '))), 'the history has per-route rates');
  for (const h of [history, after]) {
    const admin = h.samples.flatMap((s: HistorySample) => Object.keys(s.routes).filter((r) => r.startsWith('admin ')));
    t.deepEqual(admin, [], "the admin listener's requests (the console's polls) are not among the routes");
  }
  const legend = await until(`a line for ${ACCESS_ROUTE} in the routes chart`, async () => {
    const rows = await routesLegend(page);
    return rows.some((r) => r.label === ACCESS_ROUTE) ? rows : undefined;
  });
  t.true(legend.length >= 2, `the routes chart has a line per busy route (uPlot legend: ${legend.length - 1} routes)`);
  t.false(
    legend.some((r) => r.label.startsWith('admin ')),
    JSON.stringify(legend.map((r) => r.label)),
  );
});

/** Serves one page at `/` on 127.0.0.1 (reachable also as evil.localhost: Chromium resolves *.localhost to loopback). */
async function serveAttacker(html: string): Promise<number> {
  attacker = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(html));
  attacker.keepAliveTimeout = 1_000;
  await within('the attacker page server to listen', new Promise<void>((r) => attacker!.listen(0, '127.0.0.1', r)));
  return (attacker.address() as AddressInfo).port;
}

maybe('hostile: a cross-site page of a signed-in browser cannot add a user (form POST and fetch with credentials)', async (t) => {
  t.timeout(60_000);
  explain(t);
  const target = `${adminUrl()}/admin/v1/users`;
  // A form posted as text/plain whose body reads as JSON, and a no-cors fetch with the cookies: both
  // are "simple" requests, sent without asking the admin listener first.
  const port = await serveAttacker(`<!doctype html><title>cute cats</title>
<form id="f" method="post" action="${target}" enctype="text/plain"><input name='{"name":"mallory","x":"' value='"}'></form>
<script>
  const who = location.hostname === '127.0.0.1' ? 'mallory' : 'trudy';
  document.querySelector('input').name = '{"name":"' + who + '","x":"';
  fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ name: who + '2' }) })
    .catch(() => undefined)
    .finally(() => document.getElementById('f').submit());
</script>`);
  // The console is signed in in this browser context: its cookie is there to be (mis)used.
  t.true((await context.cookies()).some((c) => c.name === SESSION_COOKIE));
  for (const origin of [`http://127.0.0.1:${port}`, `http://evil.localhost:${port}`]) {
    const evil = await context.newPage();
    const answers: { method: string; status: number }[] = [];
    evil.on('response', (r) => {
      if (r.url().startsWith(target)) answers.push({ method: r.request().method(), status: r.status() });
    });
    await evil.goto(`${origin}/`, { timeout: 20_000 });
    await until(`both POSTs from ${origin} to be answered`, () => answers.length >= 2, 15_000);
    // From 127.0.0.1 (same site, another origin) the browser sends the SameSite=Strict cookie and
    // the Origin check refuses (403); from evil.localhost (another site) it sends no cookie (401).
    const refused = origin.includes('127.0.0.1') ? 403 : 401;
    t.deepEqual(answers, [
      { method: 'POST', status: refused },
      { method: 'POST', status: refused },
    ], origin);
    await evil.close();
  }
  t.deepEqual(await userNames(), ['alice'], 'no user was created');
});

maybe('hostile: changes without a session (401), without or with a wrong CSRF token (403), or from another Origin (403) are refused', async (t) => {
  t.timeout(60_000);
  const cookie = (await context.cookies()).find((c) => c.name === SESSION_COOKIE)!;
  const jar = `${SESSION_COOKIE}=${cookie.value}`;
  const session = await request(`${adminUrl()}/console/session`, { headers: { cookie: jar } });
  t.is(session.statusCode, 200);
  const csrf: string = ((await session.body.json()) as any).data.csrf;
  const add = async (name: string, headers: Record<string, string>) => {
    const r = await request(`${adminUrl()}/admin/v1/users`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ name }) });
    const body = (await r.body.json()) as { message?: string };
    return { status: r.statusCode, message: body.message };
  };
  const noCookie = await add('eve1', { 'x-csrf-token': csrf });
  t.is(noCookie.status, 401, JSON.stringify(noCookie));
  const noCsrf = await add('eve2', { cookie: jar });
  t.is(noCsrf.status, 403, JSON.stringify(noCsrf));
  t.regex(noCsrf.message!, /X-CSRF-Token/);
  const wrongCsrf = await add('eve3', { cookie: jar, 'x-csrf-token': randomBytes(32).toString('base64url') });
  t.is(wrongCsrf.status, 403, JSON.stringify(wrongCsrf));
  const wrongOrigin = await add('eve4', { cookie: jar, 'x-csrf-token': csrf, origin: 'http://evil.example' });
  t.is(wrongOrigin.status, 403, JSON.stringify(wrongOrigin));
  t.regex(wrongOrigin.message!, /Origin/);
  const nullOrigin = await add('eve5', { cookie: jar, 'x-csrf-token': csrf, origin: 'null' });
  t.is(nullOrigin.status, 403, JSON.stringify(nullOrigin));
  t.deepEqual(await userNames(), ['alice'], 'none of them created a user');
  // The same request with everything a console change carries does go through: the refusals above are the checks'.
  const allowed = await add('carol', { cookie: jar, 'x-csrf-token': csrf, origin: adminUrl() });
  t.is(allowed.status, 200, JSON.stringify(allowed));
  t.deepEqual((await userNames()).sort(), ['alice', 'carol']);
});

maybe('hostile: an expired session sends the page back to sign-in on its next refresh', async (t) => {
  t.timeout(60_000);
  const spare = cluster!.spare;
  const own = await within('a second browser context', browser!.newContext({ viewport: WIDE }));
  t.teardown(() => own.close());
  own.setDefaultTimeout(15_000);
  const p = await own.newPage();
  await p.goto(`${spare.adminUrl}/console/`, { timeout: 20_000 });
  await signIn(p, cluster!.adminToken);
  await p.getByRole('navigation', { name: 'Views' }).waitFor();
  const cookie = (await own.cookies()).find((c) => c.name === SESSION_COOKIE);
  t.truthy(cookie);
  // PIER_CONSOLE_SESSION_MS=3000 on that admin process: the processes view refreshes every 2 s.
  await p.getByLabel('Admin token').waitFor({ timeout: 20_000 });
  t.is(await p.getByRole('alert').textContent(), 'Your session ended: sign in again.');
  t.is(await p.getByRole('navigation', { name: 'Views' }).count(), 0);
  // The server refuses the session itself, not only the browser its cookie.
  const r = await request(`${spare.adminUrl}/admin/v1/status`, { headers: { cookie: `${SESSION_COOKIE}=${cookie!.value}` } });
  await r.body.dump();
  t.is(r.statusCode, 401);
  // A reload stays signed out.
  await p.reload({ timeout: 20_000 });
  await p.getByLabel('Admin token').waitFor();
  t.is(await p.getByRole('navigation', { name: 'Views' }).count(), 0);
});

maybe('screenshots of every view at 1280 and 390 px', async (t) => {
  t.timeout(120_000);
  explain(t);
  // Something to show in the connections view; the upload is still half done.
  await openSocket('Mozilla/5.0 (console screenshot)');
  const views: [string, string, string][] = [
    ['processes', 'Processes', 'tr[data-process]'],
    ['users', 'Users', 'tr[data-user]'],
    ['apps', 'Apps', 'tr[data-app]'],
    ['providers', 'Providers', 'tr[data-provider]'],
    ['connections', 'Connections', 'tr[data-conn]'],
    ['uploads', 'Uploads', 'li[data-upload]'],
    ['audit', 'Vault audit', 'tr.audit-entry'],
    ['charts', 'Charts', 'figure[data-chart] canvas'],
  ];
  for (const [file, title, ready] of views) {
    await show(page, title);
    await page.locator(ready).first().waitFor();
    if (file === 'apps') await page.getByText('Install an app', { exact: true }).click();
    await shoot(page, file, () => page.locator(ready).first().waitFor());
  }
  const names = ['signin', ...views.map((v) => v[0])].flatMap((n) => [`${n}-1280.png`, `${n}-390.png`]);
  for (const n of names) t.true(statSync(join(shotsDir, n)).size > 1_000, n);
  t.log(`screenshots in ${shotsDir}`);
});

maybe("processes: a client's refusal (a missing secret's 404 from the vault) leaves the vault's process answering, with no warning", async (t) => {
  t.timeout(60_000);
  explain(t);
  const { main } = cluster!;
  const since = Date.now();
  const missing = await adminGet('/admin/v1/vault/secret?user=alice&workspace=x&name=missing');
  t.is(missing.status, 404, missing.text);
  type Endpoint = { lastError: { code: string; at: string } | null; lastFault?: { code: string; at: string } | null };
  type Row = { id: string; endpoints?: Record<string, Endpoint> };
  /** The vault endpoint of `main` whose last error is that 404, in a status answer's replicas. */
  const refusalIn = (replicas: Row[]): [string, Endpoint] | undefined =>
    Object.entries(replicas.find((r) => r.id === main.instance)?.endpoints ?? {}).find(([name, e]) => name.startsWith('vault.') && e.lastError?.code === 'NOT_FOUND' && Date.parse(e.lastError.at) >= since);
  // The vault actor counted it as an error (what the view used to warn on), not as a fault.
  const [name, endpoint] = await until("the 404 among the vault endpoint's figures in the status", async () => refusalIn((await adminGet('/admin/v1/status')).json.data.replicas));
  t.false(!!endpoint.lastFault && Date.parse(endpoint.lastFault.at) >= since, `${name}: not a fault (${JSON.stringify(endpoint.lastFault)})`);

  // Two of the view's answers that carry it: the next poll is sent only after an answer was shown.
  const isStatus = (url: string) => new URL(url).pathname === '/admin/v1/status';
  const carrying = page.waitForResponse(async (r) => isStatus(r.url()) && r.status() === 200 && !!refusalIn(((await r.json()) as { data: { replicas: Row[] } }).data.replicas), { timeout: 15_000 });
  await show(page, 'Processes');
  await carrying;
  await page.waitForRequest((r) => isStatus(r.url()), { timeout: 15_000 });
  const row = page.locator(`tr[data-process="${main.instance}"]`);
  await row.waitFor();
  // Columns: Process (th), Roles, Host, Version, Up, Connections, Health.
  const [cells] = await cellsOf(page, `tr[data-process="${main.instance}"]`);
  t.true(cells[1].includes('vault'), cells[1]);
  t.is(cells[6], 'answering');
  t.is(await row.locator('.warn').count(), 0, 'no warning');
});

maybe('processes: a process killed with SIGKILL drops out of the view', async (t) => {
  t.timeout(60_000);
  explain(t);
  const { main, spare } = cluster!;
  await show(page, 'Processes');
  const mainRow = page.locator(`tr[data-process="${main.instance}"]`);
  const spareRow = page.locator(`tr[data-process="${spare.instance}"]`);
  await mainRow.waitFor();
  await spareRow.waitFor();
  t.is(await page.locator('tr[data-process]').count(), 2);
  // Columns: Process (th), Roles, Host, Version, Up, Connections, Health.
  const [spareCells] = await cellsOf(page, `tr[data-process="${spare.instance}"]`);
  t.is(spareCells[1], 'admin');
  t.is(spareCells[6], 'answering');

  await spare.stop('SIGKILL');
  await spareRow.waitFor({ state: 'detached', timeout: 20_000 });
  t.is(await mainRow.count(), 1, 'the living process stays');
  t.is(await page.locator('tr[data-process]').count(), 1);
  await page.getByText('Processes on the bus (1)').waitFor();
});
