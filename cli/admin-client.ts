import { readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DEFAULT_PORTS, ENV } from '../lib/config/config.js';
import { ADMIN_API, fillPath, type AdminRoute, type AnswerOf, type BodyOf, type PathParams, type QueryOf } from '../edge/admin/api.js';

/** A CLI failure, one line; `status` when the admin API answered one, `kind` for the rest (cli/outcome.ts). */
export class CliError extends Error {
  override readonly name = 'CliError';

  constructor(
    message: string,
    readonly status?: number,
    readonly kind?: 'usage' | 'unreachable' | 'auth',
  ) {
    super(message);
  }
}

export interface AdminTarget {
  url: string;
  token: string;
  /** Where the URL and the token came from, said when a call fails. */
  urlSource: string;
  tokenSource: string;
}

/** Where the admin API is and how to authenticate, from PIER_ADMIN_URL / PIER_ADMIN_PORT and the token. */
export function adminTarget(env: Record<string, string | undefined>): AdminTarget {
  const url = env.PIER_ADMIN_URL || `http://127.0.0.1:${env[ENV.adminPort] || DEFAULT_PORTS.admin}`;
  const urlSource = env.PIER_ADMIN_URL ? 'PIER_ADMIN_URL' : env[ENV.adminPort] ? `${ENV.adminPort} on 127.0.0.1` : `the default, 127.0.0.1:${DEFAULT_PORTS.admin} (set PIER_ADMIN_URL or ${ENV.adminPort})`;
  let token = env[ENV.adminToken];
  let tokenSource: string = ENV.adminToken;
  if (!token) {
    const file = join(resolve(env[ENV.dataDir] || './data'), 'admin.token');
    try {
      token = readFileSync(file, 'utf8').trim();
      tokenSource = file;
    } catch {
      throw new CliError(`no admin token: set ${ENV.adminToken}, or ${ENV.dataDir} to the data dir that holds admin.token (looked for ${file})`, undefined, 'auth');
    }
  }
  return { url: url.replace(/\/$/, ''), token, urlSource, tokenSource };
}

/** What one call of `route` sends: the path's names, the query and the body, each as the route declares them. */
export interface CallInput<R extends AdminRoute> {
  params?: PathParams<R['path']>;
  query?: QueryOf<R>;
  body?: BodyOf<R>;
}

/**
 * One admin API call of a declared route (edge/admin/api.ts); answers `data` of the envelope, typed
 * as the route declares it, or throws a one-line CliError. A string body is NDJSON (`state import`).
 */
export async function adminCall<R extends AdminRoute>(target: AdminTarget, route: R, input: CallInput<R> = {}): Promise<AnswerOf<R>> {
  return (await adminCallEnvelope(target, route, input)).data;
}

/** As adminCall, with what the envelope says beside `data` (`partial`, `truncated`, `searched`). */
export async function adminCallEnvelope<R extends AdminRoute>(target: AdminTarget, route: R, input: CallInput<R> = {}): Promise<{ data: AnswerOf<R>; beside: Record<string, unknown> }> {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries((input.query ?? {}) as Record<string, string | undefined>)) if (v !== undefined) query.set(k, v);
  const path = `${fillPath(route.path, (input.params ?? {}) as Record<string, string>)}${query.size > 0 ? `?${query}` : ''}`;
  const body = input.body as unknown;
  const contentType: Record<string, string> = body === undefined ? {} : { 'content-type': typeof body === 'string' ? 'application/x-ndjson' : 'application/json' };
  let res: Response;
  try {
    res = await fetch(`${target.url}${path}`, {
      method: route.method === 'del' ? 'DELETE' : route.method.toUpperCase(),
      headers: { authorization: `Bearer ${target.token}`, ...contentType },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    const why = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    throw new CliError(`cannot reach the admin API at ${target.url} (${why}; from ${target.urlSource}): is Pier's admin role running (npm start)?`, undefined, 'unreachable');
  }
  const text = await res.text();
  let envelope: { code?: number; message?: string; data?: unknown; [beside: string]: unknown };
  try {
    envelope = JSON.parse(text);
  } catch {
    throw new CliError(`admin API answered ${res.status} with a body that is not JSON`);
  }
  if (res.status === 401) throw new CliError(`${envelope.message ?? 'unauthorized'} (401; the admin token came from ${target.tokenSource})`, 401);
  if (!res.ok || envelope.code !== 0) throw new CliError(`${envelope.message ?? 'request failed'} (${res.status})`, res.status);
  // The server compiles against the same declaration (edge/admin/admin-api.ts).
  const { code: _code, message: _message, data, ...beside } = envelope;
  return { data: data as AnswerOf<R>, beside };
}

/** `pier state export FILE`: the admin API's NDJSON stream into FILE (0600, never overwritten). */
export async function exportState(target: AdminTarget, file: string): Promise<{ file: string; records: number }> {
  let res: Response;
  try {
    res = await fetch(`${target.url}${ADMIN_API.stateExport.path}`, { headers: { authorization: `Bearer ${target.token}` } });
  } catch (err) {
    throw new CliError(`cannot reach the admin API at ${target.url} (${(err as Error).message}; from ${target.urlSource})`, undefined, 'unreachable');
  }
  if (!res.ok || !res.body) {
    const text = await res.text().catch(() => '');
    throw new CliError(`${(() => { try { return JSON.parse(text).message; } catch { return 'export failed'; } })()} (${res.status})`, res.status);
  }
  const out = await open(file, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => {
    throw new CliError(`${file}: ${err.code === 'EEXIST' ? 'exists (an export never overwrites)' : err.message}`);
  });
  let records = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      await out.write(chunk);
      for (const b of chunk) if (b === 0x0a) records++;
    }
  } finally {
    await out.close();
  }
  return { file, records };
}

/** `pier state import FILE`: the file's records in batches within the admin body limit, the first checked against an empty target. */
export async function importState(target: AdminTarget, file: string): Promise<{ imported: number }> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  let imported = 0;
  let batch: string[] = [];
  let size = 0;
  let firstLine = 1;
  let first = true;
  const send = async () => {
    if (batch.length === 0 && !first) return;
    const data = await adminCall(target, ADMIN_API.stateImport, { query: { first: first ? 'true' : 'false', line: String(firstLine) }, body: batch.join('\n') });
    imported += data.imported;
    firstLine += batch.length;
    first = false;
    batch = [];
    size = 0;
  };
  for (const line of lines) {
    if (size + line.length > 512 * 1024 && batch.length > 0) await send();
    batch.push(line);
    size += line.length + 1;
  }
  await send();
  return { imported };
}
