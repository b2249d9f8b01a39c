import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { GatewayOptions, RecoveryInfo } from '@pier/sdk/browser';
import { ROOT } from './pier.js';
import { recordConsole, servePages, waitInPage, type Served } from './playwright.js';
import { within } from './wait.js';

/**
 * A minimal app page for the gateway's history and recovery in a real browser: it loads the SDK's
 * browser half from `/sdk/` as the example chat does (examples/chat/public/chat.js), connects with
 * `connectGateway` to `ws://<its own host name>:<wsPort>/ws` (the user's auth_token cookie going
 * along), renders every message it is handed as a line of `#log`, and keeps what its handlers saw
 * in `window.__seen` for the test.
 */

const SDK_DIST = join(ROOT, 'sdk', 'dist');

/** Every .js of the SDK's dist but its server half, by the path the page imports it from (`/sdk/browser/index.js`). */
function sdkRoutes(): Record<string, Served> {
  const routes: Record<string, Served> = {};
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory() && entry.name !== 'server') walk(path);
      else if (entry.isFile() && entry.name.endsWith('.js')) routes[`/sdk/${relative(SDK_DIST, path)}`] = { file: path, type: 'text/javascript; charset=utf-8' };
    }
  };
  walk(SDK_DIST);
  return routes;
}

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>gateway recovery</title></head>
<body>
  <span id="status" data-state="connecting">connecting</span>
  <ol id="log"></ol>
  <script type="module" src="/page.js"></script>
</body>
</html>
`;

const SCRIPT = `import { connectGateway } from '/sdk/browser/index.js';
const config = await (await fetch('/config.json')).json();
const seen = (window.__seen = { messages: [], recoveries: [], closes: [], opens: 0 });
const status = (state) => {
  document.getElementById('status').dataset.state = state;
  document.getElementById('status').textContent = state;
};
const conn = connectGateway('ws://' + location.hostname + ':' + config.wsPort + '/ws', config.options);
window.__conn = conn;
conn.on('open', () => {
  seen.opens++;
  status('open');
});
conn.on('recovery', (info) => seen.recoveries.push(info));
conn.on('close', (info) => {
  seen.closes.push(info);
  status(info.reconnecting ? 'reconnecting' : 'closed');
});
conn.on('message', (msg) => {
  seen.messages.push(msg);
  const li = document.createElement('li');
  li.textContent = typeof msg === 'string' ? msg : JSON.stringify(msg);
  document.getElementById('log').append(li);
});
`;

/**
 * The SDK's options for these pages: a keep-alive quick enough to notice a dead network in about
 * two seconds (a ping every 300 ms, 700 ms for an answer, two misses), and reconnects at most a second
 * apart, many of them: the page is kept offline for a few seconds on purpose.
 */
export const QUICK: GatewayOptions = { pingIntervalMs: 300, pongTimeoutMs: 700, maxMissedPongs: 2, reconnect: { baseMs: 200, maxMs: 1000, maxAttempts: 1000 } };

/** Serves the page (`/`), its script, its config (the gateway's port, the SDK's options) and the SDK. */
export function serveGatewayPage(wsPort: number, options: GatewayOptions = QUICK): Promise<{ port: number; close(): Promise<void> }> {
  return servePages({
    '/': { text: PAGE, type: 'text/html; charset=utf-8' },
    '/page.js': { text: SCRIPT, type: 'text/javascript; charset=utf-8' },
    '/config.json': { text: JSON.stringify({ wsPort, options }), type: 'application/json' },
    ...sdkRoutes(),
  });
}

/** What the page's handlers saw (`window.__seen`). */
export interface Seen {
  messages: unknown[];
  recoveries: RecoveryInfo[];
  closes: Array<{ code: number; reason: string; reconnecting: boolean }>;
  opens: number;
}

export interface GatewayPage {
  context: BrowserContext;
  page: Page;
  console: string[];
  /** Waits (at most `timeoutMs`, 15 s by default) until `fn(arg)`, run in the page, is truthy; answers it. */
  waitFor<R, A>(what: string, fn: (arg: A) => R, arg: A, timeoutMs?: number): Promise<R>;
  seen(): Promise<Seen>;
  /** The texts of the page's `#log` lines, as rendered. */
  rendered(): Promise<string[]>;
}

/**
 * A new browser context holding `token` as the user's auth_token cookie for `host` (the platform's
 * login stands in, as in the example), with the page at `http://<host>:<pagePort>/` loaded and its
 * first connection's recovery event seen (so it is connected and kept as one of the user's).
 */
export async function openGatewayPage(browser: Browser, host: string, pagePort: number, token: string): Promise<GatewayPage> {
  const context = await within('a new browser context', browser.newContext());
  await within('the auth cookie to be set', context.addCookies([{ name: 'auth_token', value: token, domain: host, path: '/', httpOnly: true, sameSite: 'Lax' }]));
  const page = await within('a new page', context.newPage());
  const lines = recordConsole(page);
  const waitFor = <R, A>(what: string, fn: (arg: A) => R, arg: A, timeoutMs?: number) => waitInPage(page, what, fn, arg, { timeoutMs, console: lines });
  await page.goto(`http://${host}:${pagePort}/`, { timeout: 20_000 });
  await waitFor('the first connection\'s recovery event', () => (window as any).__seen?.recoveries.length === 1 && document.getElementById('status')!.dataset.state === 'open', undefined, 20_000);
  return {
    context,
    page,
    console: lines,
    waitFor,
    seen: () => within('the page to tell what it saw', page.evaluate(() => (window as any).__seen as Seen)),
    rendered: () => within('the page to tell its log', page.locator('#log li').allTextContents()),
  };
}

/** In the page: whether its connection state (#status) is `state`. */
export const stateIs = (state: string) => document.getElementById('status')!.dataset.state === state;

/** One broadcast and Pier's answer to it (`status` 0: no answer, the request failed). */
export interface Broadcast {
  /** The broadcaster's tag, if any. */
  s?: string;
  n: number;
  status: number;
  kept?: boolean;
  offset?: number;
  delivered?: number;
  error?: string;
}

/**
 * An app broadcasting `{n}` (`{s: tag, n}` with a tag) to `user` (`POST /runtime/ws/conn/send
 * {users}`) one after another, a pause of `everyMs` between two, until stopped; every answer is
 * recorded in order. `localUrl()` is the local API asked for each one.
 */
export class Broadcaster {
  readonly sent: Broadcast[] = [];
  private running = true;
  private readonly done: Promise<void>;

  constructor(
    private readonly localUrl: () => string,
    private readonly app: { OS_APP_KEY: string; OS_APP_SECRET: string },
    private readonly user: string,
    private readonly everyMs = 50,
    readonly tag?: string,
  ) {
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    for (let n = 0; this.running; n++) {
      const b: Broadcast = this.tag === undefined ? { n, status: 0 } : { s: this.tag, n, status: 0 };
      try {
        const res = await fetch(`${this.localUrl()}/runtime/ws/conn/send`, {
          method: 'POST',
          headers: { 'x-app-key': this.app.OS_APP_KEY, 'x-app-secret': this.app.OS_APP_SECRET, 'content-type': 'application/json' },
          body: JSON.stringify({ users: [this.user], payload: this.tag === undefined ? { n } : { s: this.tag, n } }),
          signal: AbortSignal.timeout(10_000),
        });
        b.status = res.status;
        const json = (await res.json()) as { data?: { kept?: boolean; offset?: number; delivered?: number } };
        Object.assign(b, { kept: json.data?.kept, offset: json.data?.offset, delivered: json.data?.delivered });
      } catch (err) {
        b.error = (err as Error).message;
      }
      this.sent.push(b);
      await new Promise((r) => setTimeout(r, this.everyMs));
    }
  }

  /** Broadcasts answered so far that Pier said it kept. */
  get kept(): Broadcast[] {
    return this.sent.filter((b) => b.status === 200 && b.kept === true);
  }

  /** Stops after the broadcast under way; resolves with everything sent. */
  async stop(): Promise<Broadcast[]> {
    this.running = false;
    await within('the broadcaster to stop', this.done, 15_000);
    return this.sent;
  }
}
