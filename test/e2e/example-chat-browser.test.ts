import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Browser, findChromium, type Page } from '../helpers/chromium.js';
import { cleanup, fixedPorts, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';

/**
 * The example chat app (examples/chat) in a real headless Chromium, the SDK's browser half
 * loaded by the page as an app would ship it: messages round-trip through the gateway and the
 * app, a secret comes from the vault, a provider answers "/quote", a file uploads with progress,
 * and the page lives through an edge restart.
 */
const chromium = findChromium();
if (!chromium) console.log('example-chat-browser: skipped — no chromium (as root, `npm test` installs Debian\'s package; otherwise `apt-get install -y chromium`)');
const maybe = chromium ? test.serial : test.skip;

let dir: string;
let pier: PierProcess;
let ports: Record<string, string>;
let browser: Browser;
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
  if (chromium) browser = await Browser.launch(chromium);
});

test.after.always(async () => {
  chat?.stop();
  await pier?.stop();
  await browser?.close();
  if (dir) cleanup(dir);
});

const logText = (page: Page) => page.evaluate<string[]>(`[...document.querySelectorAll('#log li')].map((li) => li.textContent)`);
const say = (page: Page, text: string) => page.evaluate(`(() => { document.getElementById('text').value = ${JSON.stringify(text)}; document.getElementById('say').requestSubmit(); })()`);

maybe('the example page: chat, vault, provider, upload with progress, and an edge restart survived', async (t) => {
  const page = await browser.newPage();
  await page.navigate(chat.url);
  await page.waitFor('the gateway connection to open', `document.getElementById('status').dataset.state === 'open'`);
  const motto = await page.waitFor<string>('the motto from the vault', `document.getElementById('motto').textContent`);
  t.is(motto, 'Say what you mean; the vault keeps this line.');

  await say(page, 'hello pier');
  await page.waitFor('the message back from the app', `[...document.querySelectorAll('#log li')].some((li) => li.textContent === 'alice: hello pier')`);
  await say(page, '/quote');
  await page.waitFor('a quote from the provider app', `[...document.querySelectorAll('#log li')].some((li) => li.textContent.startsWith('quotes: '))`);

  // Upload: 3 MiB + a little, in the page's 1 MiB chunks; every progress text the page shows is recorded.
  const size = 3 * 1024 * 1024 + 77;
  const file = join(dir, 'photo.bin');
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 13 + 5) & 0xff;
  writeFileSync(file, bytes);
  await page.evaluate(`window.__progress = []; new MutationObserver(() => window.__progress.push(document.getElementById('upload-status').textContent)).observe(document.getElementById('upload-status'), { childList: true, characterData: true, subtree: true }); true`);
  await page.setFiles('#file', [file]);
  await page.waitFor('the upload to finish', `document.getElementById('upload-status').textContent === 'done' || document.getElementById('upload-status').textContent.startsWith('failed')`, 30_000);
  const progress = await page.evaluate<string[]>('window.__progress');
  t.is(progress.at(-1), 'done', progress.join(' | '));
  const loaded = progress.filter((p) => p.endsWith(' bytes')).map((p) => Number(p.split(' / ')[0]));
  t.deepEqual(loaded, [0, 1, 2, 3].map((m) => m * 1024 * 1024).concat(size), 'progress in acknowledged bytes, chunk by chunk');
  t.true(readFileSync(join(chat.uploadDir, 'photo.bin')).equals(bytes), 'the file on disk is the file picked');
  await page.waitFor('the upload announced in the chat', `[...document.querySelectorAll('#log li')].some((li) => li.textContent === 'upload: photo.bin (${size} bytes) is in /data/chat')`);

  // The edge goes away and comes back on the same ports: the page reconnects by itself.
  await pier.stop();
  await page.waitFor('the page to notice the edge is gone', `document.getElementById('status').dataset.state === 'reconnecting'`);
  await startPier();
  await page.waitFor('the page to reconnect', `document.getElementById('status').dataset.state === 'open'`, 30_000);
  await say(page, 'still here');
  await page.waitFor('a message after the restart', `[...document.querySelectorAll('#log li')].some((li) => li.textContent === 'alice: still here')`);
  const log = await logText(page);
  t.is(log.filter((l) => l === 'alice: hello pier').length, 1, 'nothing delivered twice');
  t.deepEqual(page.console.filter((l) => l.startsWith('exception')), []);
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
