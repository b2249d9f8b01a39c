// The console's only way out: the admin API on this same origin, with the session cookie the
// sign-in set (HttpOnly: this script never sees it) and the session's CSRF token on every change.
let csrf = null;
let onSignedOut = () => {};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function whenSignedOut(fn) {
  onSignedOut = fn;
}

export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrf ?? '';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  const json = await res.json().catch(() => ({}));
  if (res.status === 401 && path !== '/console/session') {
    csrf = null;
    onSignedOut('Your session ended: sign in again.');
  }
  if (!res.ok) throw new ApiError(res.status, json.message || `${res.status} ${res.statusText}`);
  return json;
}

export async function signIn(token) {
  const answer = await api('POST', '/console/session', { token });
  csrf = answer.data.csrf;
  return answer.data;
}

/** A reload keeps the session (the cookie): fetch its CSRF token again. */
export async function resume() {
  try {
    const answer = await api('GET', '/console/session');
    csrf = answer.data.csrf;
    return true;
  } catch {
    return false;
  }
}

export async function signOut() {
  await api('DELETE', '/console/session').catch(() => undefined);
  csrf = null;
}
