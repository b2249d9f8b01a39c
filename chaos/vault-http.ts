import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { proof, type Perm } from '../test/helpers/app-client.js';
import type { ChaosCluster } from './cluster.js';

/**
 * What the vault and users workloads send, as an app and an operator would: JSON over HTTP with a
 * deadline on every request, the admin API with the admin token, access tokens kept until shortly
 * before their 5-minute expiry. Nothing here decides an outcome: the workloads classify answers.
 */

/** Every request's deadline: past it, the outcome is unknown. */
export const REQUEST_MS = 10_000;

export interface Answer {
  status: number;
  json: any;
  text: string;
  header: (name: string) => string | null;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A short, stable name for a secret token (the history never holds the token itself). */
export function fingerprint(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}

/** An error as one line for the history (with its cause's code: ECONNRESET, UND_ERR_SOCKET…). */
export function errorText(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  const cause = e.cause ? ` (${e.cause.code ?? e.cause.message ?? ''})` : '';
  return `${e.name ?? 'Error'}: ${String(e.message).slice(0, 200)}${cause}`;
}

/** One JSON request; throws on no answer (network error, deadline). */
export async function jsonFetch(url: string, method: string, headers: Record<string, string>, body?: unknown, timeoutMs = REQUEST_MS): Promise<Answer> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, header: (n) => res.headers.get(n) };
}

/** The admin API, with the cluster's admin token. */
export function admin(cluster: ChaosCluster, method: string, path: string, body?: unknown): Promise<Answer> {
  return jsonFetch(`${cluster.adminUrl}${path}`, method, { authorization: `Bearer ${cluster.secrets.PIER_ADMIN_TOKEN}` }, body);
}

/**
 * A GET with a Host header of our choosing (fetch does not let one set Host): the upload listener's
 * `GET /upload/{id}` identifies the caller by user token and Host before anything else.
 */
export function hostGet(url: string, host: string, headers: Record<string, string>, timeoutMs = REQUEST_MS): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', headers: { ...headers, host }, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (text.length < 64 * 1024) text += d;
      });
      res.on('error', reject);
      // Cut off mid-body (the deadline, a killed edge): no answer.
      res.on('close', () => {
        if (!res.complete) reject(new Error('answer cut off before its end'));
      });
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        const h = res.headers;
        resolve({ status: res.statusCode ?? 0, json, text, header: (n) => (h[n.toLowerCase()] as string | undefined) ?? null });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A bounded retry of an admin call while the answer is 5xx or missing: for setup, before any fault. */
export async function adminSettled(cluster: ChaosCluster, method: string, path: string, body?: unknown, attempts = 20): Promise<Answer> {
  let last = '';
  for (let i = 0; i < attempts; i++) {
    try {
      const a = await admin(cluster, method, path, body);
      if (a.status < 500) return a;
      last = `${a.status} ${a.text.slice(0, 200)}`;
    } catch (err) {
      last = errorText(err);
    }
    await sleep(500);
  }
  throw new Error(`${method} ${path}: no answer after ${attempts} attempts (last: ${last})`);
}

export interface AppCredentials {
  key: string;
  secret: string;
}

/** Requests one access token for `perm` (a fresh proof, bcrypt cost 10); throws with the status when refused. */
export async function requestAccessToken(systemUrl: string, app: AppCredentials, perm: Perm): Promise<{ token: string; status: number }> {
  const timestamp = Math.floor(Date.now() / 1000);
  const token = await proof({ OS_APP_KEY: app.key, OS_APP_SECRET: app.secret }, timestamp);
  const a = await jsonFetch(`${systemUrl}/permission/v1alpha1/access`, 'POST', {}, { app_key: app.key, timestamp, token, perm });
  if (a.status !== 200 || typeof a.json?.data?.access_token !== 'string') throw Object.assign(new Error(`access refused: ${a.status} ${a.text.slice(0, 200)}`), { status: a.status });
  return { token: a.json.data.access_token as string, status: a.status };
}

/** Tokens live 5 minutes: renewed after 4, or at once after a 401. */
const RENEW_AFTER_MS = 4 * 60_000;

/** One app's access token, shared by its workers: one proof in flight at a time. */
export class AccessCache {
  private current: { token: string; at: number } | null = null;
  private pending: Promise<string> | null = null;

  constructor(
    private readonly systemUrl: string,
    private readonly app: AppCredentials,
    private readonly perm: Perm,
    private readonly onRenew: (outcome: { ok: boolean; error?: string }) => void = () => undefined,
  ) {}

  get(): Promise<string> {
    if (this.current && Date.now() - this.current.at < RENEW_AFTER_MS) return Promise.resolve(this.current.token);
    this.pending ??= (async () => {
      try {
        const at = Date.now();
        const { token } = await requestAccessToken(this.systemUrl, this.app, this.perm);
        this.current = { token, at };
        this.onRenew({ ok: true });
        return token;
      } catch (err) {
        this.onRenew({ ok: false, error: errorText(err) });
        throw err;
      } finally {
        this.pending = null;
      }
    })();
    return this.pending;
  }

  /** A 401 with this token: the next `get` asks for a new one. */
  invalidate(token: string): void {
    if (this.current?.token === token) this.current = null;
  }
}
