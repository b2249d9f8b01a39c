import { createReadStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { within } from './wait.js';

/**
 * Debian's headless Chromium driven by playwright-core (which downloads no browser of its own),
 * and the few things a browser test around it needs: a page server on loopback and a record of
 * what the page sent.
 */

/** Launches `executable` (Debian's /usr/bin/chromium) headless; playwright passes --no-sandbox, needed as root. */
export function launchChromium(executable: string): Promise<Browser> {
  return within(`chromium (${executable}) to start`, chromium.launch({ executablePath: executable, headless: true, args: ['--disable-dev-shm-usage', '--disable-gpu'] }), 30_000);
}

/** What a route answers: a file on disk (streamed) or a text made now. */
export type Served = { file: string; type: string } | { text: string; type: string };

/** A small HTTP server on 127.0.0.1 answering GETs from `routes` (by path, query ignored), 404 otherwise; nothing cached. */
export async function servePages(routes: Record<string, Served | (() => Served)>): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    if (req.method !== 'GET' || route === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const served = typeof route === 'function' ? route() : route;
    const headers = { 'content-type': served.type, 'cache-control': 'no-store' };
    if ('text' in served) {
      res.writeHead(200, headers).end(served.text);
      return;
    }
    res.writeHead(200, { ...headers, 'content-length': String(statSync(served.file).size) });
    createReadStream(served.file).pipe(res);
  });
  // Keep-alive connections of the browser would hold close() until they time out.
  server.keepAliveTimeout = 1_000;
  await within('the page server to listen', new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve())));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      within(
        'the page server to close',
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
      ),
  };
}

/** One request the page sent, with the phase of the test it was sent in and what became of it. */
export interface Sent {
  phase: string;
  /** When it was sent (Date.now()), for a failing test's message. */
  at: number;
  method: string;
  url: string;
  headers: Record<string, string>;
  /** The answer's status (0: no answer, the request failed), once known. */
  status?: number;
  /** The answer's headers, once known. */
  answer?: Record<string, string>;
  /** Why the request failed, when it did (connection refused, aborted by a reload…). */
  failure?: string;
}

/**
 * Records every request of `page` whose URL starts with `prefix`, tagged with the phase set at the
 * time (`log.phase = 'after reload'`), with its answer or its failure.
 */
export function recordRequests(page: Page, prefix: string): { phase: string; sent: Sent[] } {
  const log = { phase: 'start', sent: [] as Sent[] };
  const byRequest = new Map<Request, Sent>();
  page.on('request', (r) => {
    if (!r.url().startsWith(prefix)) return;
    const s: Sent = { phase: log.phase, at: Date.now(), method: r.method(), url: r.url(), headers: r.headers() };
    byRequest.set(r, s);
    log.sent.push(s);
  });
  page.on('response', (res) => {
    const s = byRequest.get(res.request());
    if (!s) return;
    s.status = res.status();
    s.answer = res.headers();
  });
  page.on('requestfailed', (r) => {
    const s = byRequest.get(r);
    if (!s) return;
    s.status = 0;
    s.failure = r.failure()?.errorText ?? 'failed';
  });
  return log;
}

/**
 * Records the console lines (`<type>: <text>`) and uncaught exceptions (`exception: <message>`) of
 * `page` from now on, for a test's assertions and a failing wait's message.
 */
export function recordConsole(page: Page): string[] {
  const lines: string[] = [];
  page.on('console', (m) => lines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`exception: ${e.name}: ${e.message}`));
  return lines;
}

/**
 * Waits (polling every 50 ms, at most `timeoutMs`) until `fn(arg)`, run in the page, is truthy and
 * answers that value; a timeout names `what` and, when given, the page's last `console` lines.
 */
export async function waitInPage<R, A>(page: Page, what: string, fn: (arg: A) => R, arg: A, { timeoutMs = 15_000, console }: { timeoutMs?: number; console?: string[] } = {}): Promise<R> {
  try {
    // `fn` is sent to the page as its source: it may use only its argument and the page's globals.
    const handle = await page.waitForFunction(fn as (arg: unknown) => R, arg as unknown, { timeout: timeoutMs, polling: 50 });
    const value = (await within(`the value of ${what}`, handle.jsonValue())) as R;
    await handle.dispose();
    return value;
  } catch (err) {
    throw new Error(`waiting (at most ${timeoutMs} ms) for ${what}: ${(err as Error).message.split('\n')[0]}${console ? ` (page console: ${console.slice(-5).join(' | ')})` : ''}`);
  }
}

/** The widths the console's screenshots are taken at (docs/operations.md "Console"). */
export const CONSOLE_WIDE = { width: 1280, height: 800 };
export const CONSOLE_NARROW = { width: 390, height: 844 };

/**
 * Full-page screenshots of what `p` shows now, at 1280 and 390 px wide (`<dir>/<name>-1280.png`,
 * `<name>-390.png`), `ready` awaited at each width; back to 1280 after. Fails when the page is wider
 * than the screen (it would scroll sideways) or a screenshot is empty. Answers the files written.
 */
export async function shootAtBothWidths(p: Page, dir: string, name: string, ready: () => Promise<unknown> = async () => undefined): Promise<string[]> {
  const paths: string[] = [];
  for (const size of [CONSOLE_WIDE, CONSOLE_NARROW]) {
    await p.setViewportSize(size);
    await ready();
    // Two frames: the layout (and uPlot's resize handler) have run for the new width.
    await p.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    // Nothing widens the page past the screen: wide tables scroll inside their own box (cards at phone width).
    const wide = await p.evaluate(() => document.documentElement.scrollWidth);
    if (wide > size.width) throw new Error(`${name} at ${size.width} px: the page is ${wide} px wide (scrolls sideways)`);
    const path = join(dir, `${name}-${size.width}.png`);
    await p.screenshot({ path, fullPage: true, timeout: 15_000 });
    if (statSync(path).size < 1_000) throw new Error(`${path}: an empty screenshot`);
    paths.push(path);
  }
  await p.setViewportSize(CONSOLE_WIDE);
  return paths;
}
