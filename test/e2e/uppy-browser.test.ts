import test, { type ExecutionContext } from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { findChromium } from '../helpers/chromium.js';
import { cleanup, cli, fixedPorts, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { launchChromium, recordRequests, servePages, type Sent } from '../helpers/playwright.js';
import { TusRaw } from '../helpers/tus-raw.js';
import { until, within } from '../helpers/wait.js';

/**
 * docs/upload.md "tus 1.0 (`/tus/`)" with the real Uppy (Dashboard + Tus, the `uppy` package's browser bundle,
 * unmodified, served by this test) in Debian's headless Chromium, driven by playwright-core: three
 * files picked in the Dashboard and uploaded with its progress bar; a large file resumed after the
 * page is reloaded mid-upload; a large file resumed after Pier is restarted mid-upload. Resuming is
 * proven from the page's own requests: a HEAD on the stored upload URL, no second POST, and a PATCH
 * from an offset above 0. One `pier start`, restarted on the same ports (fixedPorts) in the last test.
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log('uppy-browser: skipped — no chromium (as root, `npm test` installs Debian\'s package; otherwise `apt-get install -y chromium`)');
const maybe = chromiumPath ? test.serial : test.skip;

const APP_HOST = 'chat.alice.localhost';
const MiB = 1024 * 1024;
const CHUNK = 2 * MiB;
const BIG = 64 * MiB;
/** Bytes per second the page may send while a large file is uploading: slow enough to act mid-upload. */
const THROTTLE = 16 * MiB;
const FIXTURES = join(ROOT, 'test', 'fixtures', 'uppy');
const UPPY_DIST = join(ROOT, 'node_modules', 'uppy', 'dist');
/** The Dashboard's file picker (not its folder picker, not a camera input). */
const FILE_INPUT = 'input.uppy-Dashboard-input[name="files[]"]:not([webkitdirectory])';
const UPLOAD_BUTTON = 'button.uppy-StatusBar-actionBtn--upload';

let dir: string;
let ports: Record<string, string>;
let pier: PierProcess | undefined;
let token: string;
let uploadDir: string;
let browser: Browser | undefined;
let pages: { port: number; close(): Promise<void> } | undefined;
let pageUrl: string;
let endpoint: string;

const startPier = async () => {
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), ports));
};

test.before(async () => {
  if (!chromiumPath) return;
  dir = tempDir('pier-uppy-');
  ports = await fixedPorts();
  await startPier();
  const env = { ...pier!.env, PIER_ADMIN_URL: pier!.adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\nupload: { fileType: [bin, txt], dest: /data/chat, limitedSize: 268435456 }\n');
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  uploadDir = installed.json.uploadDir;
  const raw = new TusRaw(pier!.ports!.upload, APP_HOST, token);
  await until('the upload actor to know the app', async () => (await raw.send('OPTIONS', '/tus/')).headers['tus-max-size']);

  endpoint = `http://${APP_HOST}:${pier!.ports!.upload}/tus/`;
  pages = await servePages({
    '/': { file: join(FIXTURES, 'index.html'), type: 'text/html; charset=utf-8' },
    '/app.js': { file: join(FIXTURES, 'app.js'), type: 'text/javascript' },
    '/uppy.min.js': { file: join(UPPY_DIST, 'uppy.min.js'), type: 'text/javascript' },
    '/uppy.min.css': { file: join(UPPY_DIST, 'uppy.min.css'), type: 'text/css' },
    '/config.json': { text: JSON.stringify({ endpoint, token, chunkSize: CHUNK, retryDelays: [0, 1000, 2000, 3000, 5000, 5000] }), type: 'application/json' },
  });
  // The app's own origin (CORS): the page's hostname is the app's, on the page server's port.
  pageUrl = `http://${APP_HOST}:${pages.port}/`;
  browser = await launchChromium(chromiumPath);
});

test.after.always(async () => {
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`uppy-browser: ${err.message}`));
  await pages?.close().catch(() => undefined);
  await pier?.stop();
  if (dir) cleanup(dir);
});

// A CI run saw Pier stop answering after the page reload aborted a PATCH: a failing test shows
// Pier's state, what it logged above info, and its stderr.
test.afterEach.always((t) => {
  if (!t.passed && pier) t.log(pier.report());
});

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** The `Upload-Metadata` of a request, decoded. */
function metadataOf(s: Sent): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const pair of (s.headers['upload-metadata'] ?? '').split(',')) {
    const [key, value = ''] = pair.trim().split(' ');
    if (key) meta[key] = Buffer.from(value, 'base64').toString('utf8');
  }
  return meta;
}

/** The absolute upload URL a creation answered (tus-js-client resolves Location against the endpoint). */
const uploadUrlOf = (post: Sent) => new URL(post.answer?.location ?? '', endpoint).href;

interface Session {
  context: BrowserContext;
  page: Page;
  log: { phase: string; sent: Sent[] };
  console: string[];
}

/** A fresh browser context (its own localStorage) with the app's upload page loaded, its requests to Pier recorded. */
async function openPage(): Promise<Session> {
  const context = await within('a new browser context', browser!.newContext());
  const page = await within('a new page', context.newPage());
  const log = recordRequests(page, endpoint);
  const lines: string[] = [];
  page.on('console', (m) => lines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`exception: ${e.message}`));
  await loadPage({ context, page, log, console: lines });
  return { context, page, log, console: lines };
}

/** Waits for `fn` to be truthy in the page; a timeout names what was awaited and the page's last console lines. */
async function waitInPage(s: Session, what: string, fn: string, timeoutMs = 15_000): Promise<void> {
  try {
    await s.page.waitForFunction(fn, null, { timeout: timeoutMs, polling: 50 });
  } catch (err) {
    throw new Error(`waiting (at most ${timeoutMs} ms) for ${what}: ${(err as Error).message.split('\n')[0]} (page console: ${s.console.slice(-5).join(' | ')})`);
  }
}

async function loadPage(s: Session): Promise<void> {
  await s.page.goto(pageUrl, { timeout: 20_000 });
  await waitInPage(s, 'the upload page (Uppy and its Dashboard) to be ready', `document.body.dataset.ready === 'yes' && document.querySelector(${JSON.stringify(FILE_INPUT)}) !== null`);
}

/** Chromium's own throttling of what the page sends (CDP Network.emulateNetworkConditions), so a large file takes seconds. */
async function throttle(s: Session, bytesPerSecond: number): Promise<void> {
  const cdp = await within('a DevTools session on the page', s.context.newCDPSession(s.page));
  await within('Network.enable', cdp.send('Network.enable'));
  await within('Network.emulateNetworkConditions', cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: bytesPerSecond }));
}

/** Starts one large file through Uppy, throttled; its upload URL once Pier created it and acknowledged three chunks. */
async function uploadPastThreeChunks(s: Session, name: string, path: string): Promise<string> {
  await throttle(s, THROTTLE);
  await pickAndUpload(s, [path]);
  const post = await until('Pier to create the upload', () => s.log.sent.find((r) => r.method === 'POST' && r.status === 201 && metadataOf(r).filename === name), 15_000);
  const url = uploadUrlOf(post);
  await until('Pier to acknowledge three chunks', () => acknowledged(s.log.sent, url).length >= 3, 30_000);
  return url;
}

/** Picks files in the Dashboard's own file input, as the user would, then presses its Upload button. */
async function pickAndUpload(s: Session, paths: string[]): Promise<void> {
  await s.page.setInputFiles(FILE_INPUT, paths, { timeout: 10_000 });
  await s.page.click(UPLOAD_BUTTON, { timeout: 10_000 });
}

/** The page's record of its uploads (app.js). */
const uploadsIn = (s: Session) =>
  within(
    'the page to tell its uploads',
    s.page.evaluate(() => (window as any).uploads as { succeeded: Array<{ name: string; size: number; url: string }>; failed: Array<{ name: string; error: string }>; completed: number }),
  );

/** Waits for the page's batch to complete; fails at once, with Uppy's error, if a file failed. */
async function uploadedIn(s: Session, count: number, what: string, timeoutMs: number) {
  await waitInPage(s, what, `window.uploads.failed.length > 0 || window.uploads.succeeded.length >= ${count}`, timeoutMs);
  const uploads = await uploadsIn(s);
  if (uploads.failed.length > 0) throw new Error(`Uppy reported a failed upload: ${JSON.stringify(uploads.failed)}; requests: ${describe(s.log.sent)}`);
  return uploads;
}

/** The requests, one line each, for a failing assertion's message. */
const describe = (sent: Sent[]) =>
  sent.map((s) => `+${s.at - (sent[0]?.at ?? 0)}ms ${s.phase} ${s.method} ${s.url.replace(/^.*\/tus\//, '/tus/')} offset=${s.headers['upload-offset'] ?? '-'} → ${s.status ?? '?'}${s.failure ? ` (${s.failure})` : ''} ${s.answer?.['upload-offset'] ? `offset ${s.answer['upload-offset']}` : ''}`).join('\n');

/** PATCHes to `url` the server acknowledged (204). */
const acknowledged = (sent: Sent[], url: string) => sent.filter((s) => s.method === 'PATCH' && s.url === url && s.status === 204);

/** The highest offset Pier acknowledged for `url` in `sent` (its PATCH answers' Upload-Offset). */
const lastAcknowledged = (sent: Sent[], url: string) => Math.max(0, ...acknowledged(sent, url).map((s) => Number(s.answer?.['upload-offset'])));

/** The one creation of `name` in `sent` (fails if there is not exactly one). */
function creationOf(t: ExecutionContext, sent: Sent[], name: string): Sent {
  const posts = sent.filter((s) => s.method === 'POST' && metadataOf(s).filename === name);
  t.is(posts.length, 1, `one POST created ${name}:\n${describe(sent)}`);
  t.is(posts[0]?.status, 201, `${name} created`);
  return posts[0]!;
}

/** The upload URLs tus-js-client (inside Uppy) stored in the page's localStorage, under `tus::<fingerprint>::<n>`. */
const storedUrls = (s: Session) =>
  within(
    'the page to tell its stored upload URLs',
    s.page.evaluate(() =>
      Object.keys(localStorage)
        .filter((k) => k.startsWith('tus::'))
        .map((k) => (JSON.parse(localStorage.getItem(k)!) as { uploadUrl: string }).uploadUrl),
    ),
  );

/** Writes `size` random bytes at dir/name; answers the path and the bytes. */
function makeFile(name: string, size: number): { path: string; data: Buffer } {
  const data = randomBytes(size);
  const path = join(dir, name);
  writeFileSync(path, data);
  return { path, data };
}

/**
 * After `mark` (the index of the first request sent after the interruption): the client asked the
 * server where the upload of `url` stood (HEAD answered 200 with an offset > 0) and went on from
 * there (its first PATCH after that HEAD carried that offset), and created nothing new for `name`.
 */
function assertResumed(t: ExecutionContext, sent: Sent[], mark: number, url: string, name: string): { heads: Sent[]; offset: number; patch: Sent } {
  const after = sent.slice(mark);
  const log = `\n${describe(sent)}`;
  t.is(after.filter((s) => s.method === 'POST' && metadataOf(s).filename === name).length, 0, `no new POST for ${name} after the interruption${log}`);
  const patches = after.filter((s) => s.method === 'PATCH');
  t.true(patches.length > 0 && patches.every((s) => s.url === url && Number(s.headers['upload-offset']) > 0), `every PATCH after the interruption went to ${url} with Upload-Offset > 0 (the first: ${String(patches[0]?.headers['upload-offset'])})${log}`);
  const heads = after.filter((s) => s.method === 'HEAD' && s.url === url);
  const head = heads.find((s) => s.status === 200);
  t.truthy(head, `a HEAD on the stored upload URL ${url} answered 200 after the interruption${log}`);
  const offset = Number(head?.answer?.['upload-offset']);
  t.true(offset > 0, `the HEAD answered Upload-Offset ${String(head?.answer?.['upload-offset'])} > 0${log}`);
  const patch = after.slice(after.indexOf(head!) + 1).find((s) => s.method === 'PATCH');
  t.is(patch?.url, url, `the first PATCH after the HEAD went to the same upload${log}`);
  t.is(Number(patch?.headers['upload-offset']), offset, `the first PATCH after the HEAD carried Upload-Offset ${offset}, not 0${log}`);
  t.is(patch?.status, 204, `that PATCH was acknowledged${log}`);
  return { heads, offset, patch: patch! };
}

maybe('Uppy Dashboard: three files picked in its file input, uploaded over tus with the progress bar, each byte-identical in the user\'s folder', async (t) => {
  t.timeout(60_000);
  const files = [makeFile('notes.txt', 300_000), makeFile('photo.bin', 3 * MiB + 17), makeFile('archive.bin', 5 * MiB + 3)];
  const s = await openPage();
  try {
    // Slow enough that the progress bar has something to show between 0 and 100.
    await throttle(s, 4 * MiB);
    // Every value the Dashboard's progress bar takes, as the user would see it move.
    await within('the progress bar recorder to be set up', s.page.evaluate(() => {
      const seen: string[] = [];
      (window as any).progressBar = seen;
      const read = () => {
        const bar = document.querySelector('.uppy-StatusBar-progress');
        const value = bar?.getAttribute('aria-valuenow');
        if (value != null && seen.at(-1) !== value) seen.push(value);
      };
      new MutationObserver(read).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['aria-valuenow'] });
    }));
    await pickAndUpload(s, files.map((f) => f.path));
    const uploads = await uploadedIn(s, 3, 'Uppy to report the three uploads', 40_000);
    t.deepEqual(uploads.succeeded.map((u) => u.name).sort(), ['archive.bin', 'notes.txt', 'photo.bin']);
    await waitInPage(s, 'the Dashboard\'s status bar to show the batch complete', `document.querySelector('.uppy-StatusBar.is-complete') !== null`);
    for (const f of files) {
      const name = f.path.slice(dir.length + 1);
      // sha256 rather than t.deepEqual on the buffers: ava compares a Buffer byte by byte, for seconds.
      t.is(sha256(readFileSync(join(uploadDir, name))), sha256(f.data), `${name} is byte-identical in the user's folder`);
      const post = creationOf(t, s.log.sent, name);
      t.is(uploads.succeeded.find((u) => u.name === name)?.url, uploadUrlOf(post), `${name}: Uppy's upload URL is the one Pier created`);
    }
    const bar = (await within('the page to tell the progress bar\'s values', s.page.evaluate(() => (window as any).progressBar))) as string[];
    t.true(
      bar.some((v) => Number(v) > 0 && Number(v) < 100),
      `the progress bar showed the upload under way: ${bar.join(', ')}`,
    );
    t.is(bar.at(-1), '100', `the progress bar ended full: ${bar.join(', ')}`);
    t.log(`progress bar: ${bar.join(', ')}`);
    t.true(
      s.log.sent.filter((r) => r.method === 'PATCH').length >= 1 + 2 + 3,
      `the files went in ${CHUNK}-byte chunks:\n${describe(s.log.sent)}`,
    );
    t.deepEqual(s.console.filter((l) => l.startsWith('exception') || l.startsWith('error')), []);
    t.log(describe(s.log.sent));
  } finally {
    await within('the browser context to close', s.context.close());
  }
});

maybe('Uppy resumes a large file after the page is reloaded mid-upload: HEAD on the stored URL, no new POST, PATCH from offset > 0, byte-identical', async (t) => {
  t.timeout(90_000);
  const name = 'reload.bin';
  const file = makeFile(name, BIG);
  const s = await openPage();
  try {
    const url = await uploadPastThreeChunks(s, name, file.path);
    t.false(existsSync(join(uploadDir, name)), 'the upload is not complete when the page reloads');
    // tus-js-client (inside Uppy) stored the upload URL under the file's fingerprint.
    t.deepEqual(await storedUrls(s), [url], 'localStorage holds the upload URL before the reload');

    const mark = s.log.sent.length;
    s.log.phase = 'after reload';
    await s.page.reload({ timeout: 20_000 });
    await waitInPage(s, 'the upload page to be ready again', `document.body.dataset.ready === 'yes' && document.querySelector(${JSON.stringify(FILE_INPUT)}) !== null`);
    t.deepEqual(await uploadsIn(s), { succeeded: [], failed: [], completed: 0 }, 'a new page: Uppy starts empty');
    t.deepEqual(await storedUrls(s), [url], 'the stored upload URL survived the reload');
    await pickAndUpload(s, [file.path]);
    const uploads = await uploadedIn(s, 1, 'Uppy to finish the resumed upload', 60_000);

    const { offset } = assertResumed(t, s.log.sent, mark, url, name);
    const before = lastAcknowledged(s.log.sent.slice(0, mark), url);
    t.true(offset >= before && offset < BIG, `resumed at ${offset}: not below the ${before} bytes acknowledged before the reload, before the end`);
    t.is(uploads.succeeded[0]?.url, url, 'Uppy finished the upload it had started');
    t.is(sha256(readFileSync(join(uploadDir, name))), sha256(file.data), 'byte-identical in the user\'s folder');
    t.deepEqual(await storedUrls(s), [], 'the stored URL was removed on success (removeFingerprintOnSuccess)');
    const sentAfter = s.log.sent.slice(mark).filter((r) => r.method === 'PATCH' && r.status === 204);
    t.is(sentAfter.at(-1)?.answer?.['upload-offset'], String(BIG), 'the last PATCH brought the upload to its length');
    t.log(`requests around the reload:\n${describe(s.log.sent.slice(mark - 2, mark + 4))}`);
    t.log(`reload: ${acknowledged(s.log.sent.slice(0, mark), url).length} chunks (${before} bytes) acknowledged before; after it HEAD → ${offset}, first PATCH at ${offset}, ${sentAfter.length} PATCHes to ${BIG}`);
  } finally {
    await within('the browser context to close', s.context.close());
  }
});

maybe('Uppy resumes a large file after Pier is restarted mid-upload (same ports): retried across the outage, PATCH from offset > 0, no second POST, byte-identical', async (t) => {
  t.timeout(90_000);
  const name = 'restart.bin';
  const file = makeFile(name, BIG);
  const s = await openPage();
  try {
    const url = await uploadPastThreeChunks(s, name, file.path);

    const mark = s.log.sent.length;
    s.log.phase = 'pier stopped';
    await within('Pier to stop', pier!.stop(), 20_000);
    t.false(existsSync(join(uploadDir, name)), 'the upload is not complete when Pier stops');
    await startPier();
    s.log.phase = 'pier restarted';
    const uploads = await uploadedIn(s, 1, 'Uppy to finish the upload across the restart', 60_000);

    const after = s.log.sent.slice(mark);
    t.true(
      after.some((r) => r.status === 0 || (r.status !== undefined && r.status >= 500)),
      `the page felt the outage (a request failed while Pier was down):\n${describe(s.log.sent)}`,
    );
    const { offset } = assertResumed(t, s.log.sent, mark, url, name);
    const before = lastAcknowledged(s.log.sent.slice(0, mark), url);
    t.true(offset >= before && offset < BIG, `resumed at ${offset}: not below the ${before} bytes acknowledged before the restart, before the end`);
    t.is(s.log.sent.filter((r) => r.method === 'POST').length, 1, 'one POST in all: the upload was never created again');
    t.is(uploads.succeeded[0]?.url, url, 'Uppy finished the upload it had started');
    t.is(sha256(readFileSync(join(uploadDir, name))), sha256(file.data), 'byte-identical in the user\'s folder');
    t.log(`requests around the restart:\n${describe(s.log.sent.slice(mark - 2, mark + 6))}`);
    t.log(`restart: ${acknowledged(s.log.sent.slice(0, mark), url).length} chunks (${before} bytes) acknowledged before; after it ${after.filter((r) => r.status === 0).length} failed requests, HEAD → ${offset}, first PATCH at ${offset}`);
  } finally {
    await within('the browser context to close', s.context.close());
  }
});
