import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_PORTS, ENV } from '../lib/config.js';

export class CliError extends Error {
  override readonly name = 'CliError';
}

export interface AdminTarget {
  url: string;
  token: string;
}

/** Where the admin API is and how to authenticate, from PIER_ADMIN_URL / PIER_ADMIN_PORT and the token. */
export function adminTarget(env: Record<string, string | undefined>): AdminTarget {
  const url = env.PIER_ADMIN_URL || `http://127.0.0.1:${env[ENV.adminPort] || DEFAULT_PORTS.admin}`;
  let token = env[ENV.adminToken];
  if (!token) {
    const file = join(resolve(env[ENV.dataDir] || './data'), 'admin.token');
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch {
      throw new CliError(`no admin token: set ${ENV.adminToken} or run from the directory whose data dir holds ${file}`);
    }
  }
  return { url: url.replace(/\/$/, ''), token };
}

/** One admin API call; returns `data` of the envelope or throws a one-line CliError. */
export async function adminCall(target: AdminTarget, method: string, path: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${target.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${target.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    const why = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    throw new CliError(`cannot reach the admin API at ${target.url} (${why}): is Pier running (npm start)?`);
  }
  const text = await res.text();
  let envelope: { code?: number; message?: string; data?: unknown };
  try {
    envelope = JSON.parse(text);
  } catch {
    throw new CliError(`admin API answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok || envelope.code !== 0) throw new CliError(`${envelope.message ?? 'request failed'} (${res.status})`);
  return envelope.data;
}
