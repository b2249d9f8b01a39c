// @ts-check
// The console's only way out: the admin API on this same origin, with the session cookie the
// sign-in set (HttpOnly: this script never sees it) and the session's CSRF token on every change.
// What each route takes and answers is declared once, in edge/admin/api.ts (ADMIN_API).

/**
 * @typedef {import('../edge/admin/api.js').AdminApi} AdminApi
 * @typedef {import('../edge/admin/api.js').ConsoleSession} ConsoleSession
 */
/**
 * @template R
 * @typedef {import('../edge/admin/api.js').AnswerOf<R>} AnswerOf
 */
/**
 * @template R
 * @typedef {import('../edge/admin/api.js').BodyOf<R>} BodyOf
 */
/**
 * @template R
 * @typedef {import('../edge/admin/api.js').QueryOf<R>} QueryOf
 */
/**
 * @template {string} P
 * @typedef {import('../edge/admin/api.js').PathParams<P>} PathParams
 */
/**
 * Every JSON answer: `data` is the route's answer; `partial` and `truncated` sit beside it where a
 * route says so (docs/protocol.md "Admin API").
 * @template T
 * @typedef {{ code: number, message: string, data: T, partial?: boolean, truncated?: boolean }} Envelope
 */
/** @typedef {'GET' | 'POST' | 'PUT' | 'DELETE'} HttpMethod */
/**
 * The routes the console calls.
 * @typedef {'status' | 'userList' | 'userAdd' | 'userToken' | 'userRevoke' | 'appList' | 'appInstall' | 'appUninstall' | 'providerList' | 'providerSuspend' | 'providerResume' | 'vaultAudit' | 'vaultList' | 'vaultVersions' | 'vaultDeleted' | 'vaultRestore' | 'vaultUndelete' | 'vaultFormats' | 'connections' | 'connectionsClose' | 'uploads' | 'metricsHistory'} RouteName
 */

/**
 * Their methods and paths. Each path is checked against ADMIN_API's by the type: a path that is not
 * the declared one does not compile. (The declared method is not a literal type there: kept by hand.)
 * @type {{ readonly [K in RouteName]: readonly [HttpMethod, AdminApi[K]['path']] }}
 */
const ROUTES = {
  status: ['GET', '/admin/v1/status'],
  userList: ['GET', '/admin/v1/users'],
  userAdd: ['POST', '/admin/v1/users'],
  userToken: ['POST', '/admin/v1/users/:name/tokens'],
  userRevoke: ['POST', '/admin/v1/users/:name/revoke'],
  appList: ['GET', '/admin/v1/apps'],
  appInstall: ['POST', '/admin/v1/apps'],
  appUninstall: ['DELETE', '/admin/v1/apps/:user/:app'],
  providerList: ['GET', '/admin/v1/providers'],
  providerSuspend: ['POST', '/admin/v1/providers/:name/suspend'],
  providerResume: ['POST', '/admin/v1/providers/:name/resume'],
  vaultAudit: ['GET', '/admin/v1/vault/audit'],
  vaultList: ['GET', '/admin/v1/vault/secrets'],
  vaultVersions: ['GET', '/admin/v1/vault/versions'],
  vaultDeleted: ['GET', '/admin/v1/vault/deleted'],
  vaultRestore: ['POST', '/admin/v1/vault/secret/restore'],
  vaultUndelete: ['POST', '/admin/v1/vault/secret/undelete'],
  vaultFormats: ['GET', '/admin/v1/vault/rekey'],
  connections: ['GET', '/admin/v1/connections'],
  connectionsClose: ['POST', '/admin/v1/connections/close'],
  uploads: ['GET', '/admin/v1/uploads'],
  metricsHistory: ['GET', '/admin/v1/metrics/history'],
};

/**
 * What a call takes besides the route: its path's `:names`, its query (empty values left out), its
 * body, and the signal that aborts it.
 * @template {RouteName} K
 * @typedef {object} CallOptions
 * @property {PathParams<AdminApi[K]['path']>} [params]
 * @property {QueryOf<AdminApi[K]>} [query]
 * @property {BodyOf<AdminApi[K]>} [body]
 * @property {AbortSignal} [signal]
 */

/** @type {string | null} */
let csrf = null;
/** @type {(notice: string) => void} */
let onSignedOut = () => {};

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** @param {(notice: string) => void} fn called when the server answers 401: the session is gone */
export function whenSignedOut(fn) {
  onSignedOut = fn;
}

/** @param {unknown} json */
const messageIn = (json) => (typeof json === 'object' && json !== null && 'message' in json && typeof json.message === 'string' ? json.message : '');

/**
 * One request to this origin; its answer's envelope, or an ApiError with the server's message.
 * @template T
 * @param {HttpMethod} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {AbortSignal} [signal]
 * @returns {Promise<Envelope<T>>}
 */
async function request(method, path, body, signal) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrf ?? '';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store', signal });
  /** @type {unknown} */
  const json = await res.json().catch(() => ({}));
  signal?.throwIfAborted();
  if (res.status === 401 && path !== '/console/session') {
    csrf = null;
    onSignedOut('Your session ended: sign in again.');
  }
  if (!res.ok) throw new ApiError(res.status, messageIn(json) || `${res.status} ${res.statusText}`);
  // The server answers the declared type (edge/admin/api.ts): taken at its word.
  return /** @type {Envelope<T>} */ (json);
}

/**
 * A path with its `:names` filled in, each encoded (as edge/admin/api.ts `fillPath`).
 * @param {string} path
 * @param {Record<string, string>} params
 */
function fillPath(path, params) {
  return path.replace(/:([A-Za-z]+)/g, (_, /** @type {string} */ name) => {
    const v = params[name];
    if (v === undefined) throw new Error(`${path}: no value for :${name}`);
    return encodeURIComponent(v);
  });
}

/**
 * Calls an admin route; its whole envelope (for `partial` and `truncated`).
 * @template {RouteName} K
 * @param {K} name
 * @param {CallOptions<K>} [o]
 * @returns {Promise<Envelope<AnswerOf<AdminApi[K]>>>}
 */
export function call(name, o = {}) {
  const [method, template] = ROUTES[name];
  const path = fillPath(template, /** @type {Record<string, string>} */ (o.params ?? {}));
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(o.query ?? {})) if (typeof v === 'string' && v !== '') search.set(k, v);
  const qs = search.toString();
  return request(method, qs ? `${path}?${qs}` : path, o.body, o.signal);
}

/**
 * Calls an admin route; its answer's `data`.
 * @template {RouteName} K
 * @param {K} name
 * @param {CallOptions<K>} [o]
 * @returns {Promise<AnswerOf<AdminApi[K]>>}
 */
export async function get(name, o) {
  return (await call(name, o)).data;
}

/**
 * Opens a session with the admin token (sent this once) and keeps its CSRF token.
 * @param {string} token
 */
export async function signIn(token) {
  /** @type {Envelope<ConsoleSession>} */
  const answer = await request('POST', '/console/session', { token });
  csrf = answer.data.csrf;
  return answer.data;
}

/** A reload keeps the session (the cookie): fetch its CSRF token again. */
export async function resume() {
  try {
    /** @type {Envelope<ConsoleSession>} */
    const answer = await request('GET', '/console/session');
    csrf = answer.data.csrf;
    return true;
  } catch {
    return false;
  }
}

export async function signOut() {
  await request('DELETE', '/console/session').catch(() => undefined);
  csrf = null;
}
