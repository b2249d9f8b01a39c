import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { findChromium } from '../helpers/chromium.js';
import { cleanup, fixedPorts, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { launchChromium, recordConsole, waitInPage } from '../helpers/playwright.js';
import { within } from '../helpers/wait.js';

/**
 * The example chat app (examples/chat) in Debian's headless Chromium driven by playwright-core, the
 * SDK's browser half loaded by the page as an app would ship it: messages round-trip through the
 * gateway and the app, a secret comes from the vault, a provider answers "/quote", a file uploads
 * with progress, and the page lives through an edge restart, getting what was said while it was offline.
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log('example-chat-browser: skipped — no chromium (as root, `npm test` installs Debian\'s package; otherwise `apt-get install -y chromium`)');
const maybe = chromiumPath ? test.serial : test.skip;

let dir: string;
let pier: PierProcess;
let ports: Record<string, string>;
let browser: Browser | undefined;
let chat: { url: string; uploadDir: string; stop(): void };

const startPier = async () => {
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), ports));
};

test.before(async () => {
  dir = tempDir('pier-example-');
  ports = await fixedPorts();
  await startPier();
  const { setupChat } = await import(pathToFileURL(join(ROOT, 'examples', 'chat', 'setup.mjs')).href);
  chat = await setupChat({ adminEnv: { ...pier.env, PIER_ADMIN_URL: pier.adminUrl }, ports: pier.ports, dir });
  if (chromiumPath) browser = await launchChromium(chromiumPath);
});

test.after.always(async () => {
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`example-chat-browser: ${err.message}`));
  chat?.stop();
  await within('Pier to stop', pier?.stop() ?? Promise.resolve(null), 20_000).catch((err: Error) => console.log(`example-chat-browser: ${err.message}`));
  if (dir) cleanup(dir);
});

/** The page's connection state (#status), as chat.js sets it from the SDK's open and close events. */
const stateIs = (state: string) => document.getElementById('status')!.dataset.state === state;
/** Whether the chat log has a line that is exactly `text`. */
const hasLine = (text: string) => [...document.querySelectorAll('#log li')].some((li) => li.textContent === text);
/** Whether the chat log has a line starting with `prefix`. */
const hasLineStarting = (prefix: string) => [...document.querySelectorAll('#log li')].some((li) => li.textContent!.startsWith(prefix));

const logText = (page: Page) => within('the page to tell its chat log', page.locator('#log li').allTextContents());

/** Types `text` in the message box and presses Send, as the user would. */
async function say(page: Page, text: string): Promise<void> {
  await page.fill('#text', text, { timeout: 10_000 });
  await page.click('#say button', { timeout: 10_000 });
}

maybe('the example page: chat, vault, provider, upload with progress, and an edge restart survived', async (t) => {
  const context = await within('a new browser context', browser!.newContext());
  const page = await within('a new page', context.newPage());
  const pageConsole = recordConsole(page);
  const waitFor = <R, A>(what: string, fn: (arg: A) => R, arg: A, timeoutMs?: number) => waitInPage(page, what, fn, arg, { timeoutMs, console: pageConsole });

  await page.goto(chat.url, { timeout: 20_000 });
  await waitFor('the gateway connection to open', stateIs, 'open');
  const motto = await waitFor('the motto from the vault', () => document.getElementById('motto')!.textContent, undefined);
  t.is(motto, 'Say what you mean; the vault keeps this line.');

  await say(page, 'hello pier');
  await waitFor('the message back from the app', hasLine, 'alice: hello pier');
  await say(page, '/quote');
  await waitFor('a quote from the provider app', hasLineStarting, 'quotes: ');

  // Upload: 3 MiB + a little, in the page's 1 MiB chunks; every progress text the page shows is recorded.
  const size = 3 * 1024 * 1024 + 77;
  const file = join(dir, 'photo.bin');
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 13 + 5) & 0xff;
  writeFileSync(file, bytes);
  await within(
    'the progress recorder to be set up',
    page.evaluate(() => {
      const status = document.getElementById('upload-status')!;
      const seen: string[] = [];
      (window as any).__progress = seen;
      new MutationObserver(() => seen.push(status.textContent ?? '')).observe(status, { childList: true, characterData: true, subtree: true });
    }),
  );
  // Picks the file in #file as the user would: input and change fire, chat.js starts the upload.
  await page.setInputFiles('#file', [file], { timeout: 10_000 });
  await waitFor(
    'the upload to finish',
    () => {
      const status = document.getElementById('upload-status')!.textContent!;
      return status === 'done' || status.startsWith('failed');
    },
    undefined,
    30_000,
  );
  const progress = await within('the page to tell its progress texts', page.evaluate(() => (window as any).__progress as string[]));
  t.is(progress.at(-1), 'done', progress.join(' | '));
  const loaded = progress.filter((p) => p.endsWith(' bytes')).map((p) => Number(p.split(' / ')[0]));
  t.deepEqual(loaded, [0, 1, 2, 3].map((m) => m * 1024 * 1024).concat(size), 'progress in acknowledged bytes, chunk by chunk');
  t.true(readFileSync(join(chat.uploadDir, 'photo.bin')).equals(bytes), 'the file on disk is the file picked');
  await waitFor('the upload announced in the chat', hasLine, `upload: photo.bin (${size} bytes) is in /data/chat`);

  // The edge goes away and comes back on the same ports: the page reconnects by itself. Meanwhile
  // its own network goes too, and once Pier is back, alice says something from another tab while this
  // page is still offline: it appears here after the page reconnects (the SDK's recovery).
  await within('Pier to stop', pier.stop(), 20_000);
  await waitFor('the page to notice the edge is gone', stateIs, 'reconnecting');
  await within('the page to go offline', context.setOffline(true));
  await startPier();
  const otherTab = await within('a second browser context', browser!.newContext());
  t.teardown(() => otherTab.close());
  const tab = await within('a second tab', otherTab.newPage());
  await tab.goto(chat.url, { timeout: 20_000 });
  await waitInPage(tab, 'the second tab to connect', stateIs, 'open');
  await say(tab, 'said while you were offline');
  await waitInPage(tab, 'the message back in the second tab', hasLine, 'alice: said while you were offline');
  t.false((await logText(page)).includes('alice: said while you were offline'), 'not on the offline page yet');
  await within('the page to go online', context.setOffline(false));
  await waitFor('the page to reconnect', stateIs, 'open', 30_000);
  await waitFor('the message said while the page was offline', hasLine, 'alice: said while you were offline');
  t.true(await within('the page to tell whether its notice shows', page.locator('#notice').isHidden()), 'no "messages may be missing" notice: the page recovered');
  await say(page, 'still here');
  await waitFor('a message after the restart', hasLine, 'alice: still here');
  const log = await logText(page);
  t.is(log.filter((l) => l === 'alice: hello pier').length, 1, 'nothing delivered twice');
  t.is(log.filter((l) => l === 'alice: said while you were offline').length, 1, 'the one said while offline, once');
  t.deepEqual(log.slice(-2), ['alice: said while you were offline', 'alice: still here'], 'in order');
  t.deepEqual(pageConsole.filter((l) => l.startsWith('exception')), []);
});

/** A raw request to the example's backend, path sent exactly as given (no URL normalisation). */
function raw(url: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

test.serial('hostile: the example serves nothing outside its page and the SDK, and takes no unsigned callback', async (t) => {
  for (const path of ['/sdk/../../package.json', '/../../package.json', '/sdk/..%2f..%2fpackage.json', '/sdk/server/app.d.ts', '/setup.mjs', '/%00']) {
    const r = await raw(chat.url, path);
    t.is(r.status, 404, path);
    t.false(r.body.includes('"dependencies"'), path);
  }
  t.is((await raw(chat.url, '/sdk/browser/index.js')).status, 200, 'the SDK itself is served');
  const forged = JSON.stringify({ data: { event: 'chat', data: { text: 'forged' } }, action: 'message', user_name: 'alice', conn_id: 'x' });
  const answer = await raw(chat.url, '/cb', { method: 'POST', headers: { 'content-type': 'application/json', 'x-pier-event-id': 'e1', 'x-pier-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}` }, body: forged });
  t.is(answer.status, 401);
});

maybe('at a phone width (390 px) the page lays out at device width with body text of at least 14 px', async (t) => {
  // A phone as Chromium emulates one: without `<meta name="viewport">` it lays the page out at 980 px.
  const context = await within('a phone-sized browser context', browser!.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true }));
  t.teardown(() => context.close());
  const page = await within('a new page', context.newPage());
  await page.goto(chat.url, { timeout: 20_000 });
  const layout = await within(
    'the page to tell its layout',
    page.evaluate(() => ({ width: document.documentElement.clientWidth, fontPx: parseFloat(getComputedStyle(document.body).fontSize), scale: window.visualViewport?.scale ?? 1 })),
  );
  t.is(layout.width, 390, 'laid out at the device width, not 980 px');
  t.true(layout.fontPx * layout.scale >= 14, `body text is ${layout.fontPx} px at scale ${layout.scale}`);
});
