import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';

/** Debian's chromium, when installed (scripts/ensure-chromium.js installs it as root). */
export function findChromium(): string | null {
  for (const name of ['chromium', 'chromium-browser']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}

/**
 * A headless Chromium driven over the DevTools protocol (only what the tests need: one page,
 * navigate, evaluate, pick files), on `ws`, which Pier already depends on.
 */
export class Browser {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  private readonly listeners = new Set<(method: string, params: any, sessionId?: string) => void>();

  private constructor(
    private readonly proc: ChildProcess,
    private readonly socket: WebSocket,
    private readonly profile: string,
  ) {
    // The browser gone: every command still waiting fails at once instead of at its deadline.
    socket.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('chromium closed its DevTools connection'));
      this.waiting.clear();
    });
    socket.on('message', (raw) => {
      const msg = JSON.parse(String(raw));
      if (msg.id !== undefined) {
        const w = this.waiting.get(msg.id);
        this.waiting.delete(msg.id);
        if (msg.error) w?.reject(new Error(`${msg.error.message} (${msg.error.code})`));
        else w?.resolve(msg.result);
      } else {
        for (const l of this.listeners) l(msg.method, msg.params, msg.sessionId);
      }
    });
  }

  static async launch(executable: string, timeoutMs = 30_000): Promise<Browser> {
    const profile = mkdtempSync(join(tmpdir(), 'pier-chromium-'));
    // --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
    const proc = spawn(executable, ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--remote-debugging-port=0', `--user-data-dir=${profile}`, 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const url = await new Promise<string>((resolve, reject) => {
      let err = '';
      const timer = setTimeout(() => reject(new Error(`chromium did not open its DevTools port within ${timeoutMs} ms:\n${err}`)), timeoutMs);
      proc.stderr!.on('data', (d) => {
        err += d;
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      proc.on('exit', (code) => reject(new Error(`chromium exited with ${code}:\n${err}`)));
    });
    proc.stderr!.resume();
    const socket = new WebSocket(url, { perMessageDeflate: false });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    return new Browser(proc, socket, profile);
  }

  /** One DevTools command; rejects naming it if no answer comes within `timeoutMs` or the browser goes away. */
  send(method: string, params: Record<string, unknown> = {}, sessionId?: string, timeoutMs = 30_000): Promise<any> {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`chromium did not answer ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      const settle = <T>(fn: (v: T) => void) => (v: T) => {
        clearTimeout(timer);
        fn(v);
      };
      this.waiting.set(id, { resolve: settle(resolve), reject: settle(reject) });
    });
  }

  on(fn: (method: string, params: any, sessionId?: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async newPage(): Promise<Page> {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    return page;
  }

  /** Closes the browser, waits (at most 5 s, then kills it) until it has exited, and removes its profile. */
  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) return resolve();
      this.proc.once('exit', () => resolve());
    });
    await Promise.race([this.send('Browser.close'), new Promise((r) => setTimeout(r, 2_000))]).catch(() => undefined);
    const killer = setTimeout(() => this.proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killer);
    this.socket.terminate();
    rmSync(this.profile, { recursive: true, force: true, maxRetries: 5 });
  }
}

export class Page {
  /** Console lines and uncaught exceptions of the page, for a failing test's message. */
  readonly console: string[] = [];

  constructor(
    private readonly browser: Browser,
    private readonly sessionId: string,
  ) {
    browser.on((method, params, session) => {
      if (session !== sessionId) return;
      if (method === 'Runtime.consoleAPICalled') this.console.push(`${params.type}: ${params.args.map((a: any) => a.value ?? a.description).join(' ')}`);
      if (method === 'Runtime.exceptionThrown') this.console.push(`exception: ${params.exceptionDetails.exception?.description ?? params.exceptionDetails.text}`);
    });
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<any> {
    return this.browser.send(method, params, this.sessionId);
  }

  async navigate(url: string, timeoutMs = 20_000): Promise<void> {
    const loaded = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${url} did not load within ${timeoutMs} ms`)), timeoutMs);
      const off = this.browser.on((method, _params, session) => {
        if (session === this.sessionId && method === 'Page.loadEventFired') {
          clearTimeout(timer);
          off();
          resolve();
        }
      });
    });
    const r = await this.send('Page.navigate', { url });
    if (r.errorText) throw new Error(`navigating to ${url}: ${r.errorText}`);
    await loaded;
  }

  /** Runs `expression` in the page (promises awaited); answers its value. */
  async evaluate<T = unknown>(expression: string): Promise<T> {
    const r = await this.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  }

  /** Polls `expression` in the page until it is truthy; fails naming `what` after `timeoutMs`. */
  async waitFor<T = unknown>(what: string, expression: string, timeoutMs = 15_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      last = await this.evaluate(expression).catch((e: Error) => e.message);
      if (last) return last as T;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)}; page console: ${this.console.slice(-5).join(' | ')})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Picks files for an `<input type=file>`, as the user would (input and change events fire). */
  async setFiles(selector: string, paths: string[]): Promise<void> {
    const { root } = await this.send('DOM.getDocument');
    const { nodeId } = await this.send('DOM.querySelector', { nodeId: root.nodeId, selector });
    if (!nodeId) throw new Error(`no element matches ${selector}`);
    await this.send('DOM.setFileInputFiles', { nodeId, files: paths });
  }
}
