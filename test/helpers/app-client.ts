import bcrypt from 'bcryptjs';

/**
 * The three values an installed app gets (install output `env`). `OS_SYSTEM_SERVER` is `host:port`:
 * the helpers below build `'http://' + OS_SYSTEM_SERVER` exactly as the platform's apps do.
 */
export interface AppEnv {
  OS_SYSTEM_SERVER: string;
  OS_APP_KEY: string;
  OS_APP_SECRET: string;
}

export interface Perm {
  group: string;
  dataType: string;
  version: string;
  ops: string[];
}

/** What an app does: bcrypt(app_key + timestamp + app_secret) at cost 10. */
export function proof(env: Pick<AppEnv, 'OS_APP_KEY' | 'OS_APP_SECRET'>, timestamp: number, cost = 10): Promise<string> {
  return bcrypt.hash(`${env.OS_APP_KEY}${timestamp}${env.OS_APP_SECRET}`, cost);
}

export async function requestAccess(systemServer: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://${systemServer}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

/** Obtains an access token as an app would; throws with the answer when refused. */
export async function accessToken(env: AppEnv, perm: Perm, nowSeconds = Math.floor(Date.now() / 1000)): Promise<string> {
  const r = await requestAccess(env.OS_SYSTEM_SERVER, { app_key: env.OS_APP_KEY, timestamp: nowSeconds, token: await proof(env, nowSeconds), perm });
  if (r.status !== 200) throw new Error(`access refused: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json.data.access_token;
}

export function callProvider(systemServer: string, path: string, token: string | null, init: RequestInit = {}): Promise<Response> {
  const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
  if (token !== null) headers['x-access-token'] = token;
  return fetch(`http://${systemServer}/system-server/v1alpha1/${path}`, { ...init, headers });
}

export const VAULT_OPS = ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret'];

/** The perm an app asks for to use the vault on one workspace. */
export function vaultPerm(workspace: string, ops = VAULT_OPS): Perm {
  return { dataType: 'secret', group: 'secret.vault', version: 'v1', ops: ops.map((op) => `${op}?workspace=${workspace}`) };
}

export interface VaultReply {
  status: number;
  text: string;
  json: any;
  version: string | null;
}

/** One vault operation as an app sends it: X-Authorization (the user) and X-Access-Token (the app). */
export async function vaultCall(
  systemServer: string,
  op: string,
  workspace: string,
  auth: { user: string | null; access: string | null },
  body: unknown,
  method = 'POST',
): Promise<VaultReply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth.user !== null) headers['x-authorization'] = auth.user;
  if (auth.access !== null) headers['x-access-token'] = auth.access;
  const res = await fetch(`http://${systemServer}/system-server/v1alpha1/secret/secret.vault/v1/${op}?workspace=${workspace}`, {
    method,
    headers,
    body: method === 'GET' ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, version: res.headers.get('x-pier-secret-version') };
}
