import { backoffDelay, sleep } from '../backoff.js';
import { errorFromAnswer, NetworkError, PierError, readJson } from '../errors.js';

/** The platform's upload protocol names this outcome by its envelope's text alone (its HTTP code is a plain 400). */
const INVALID_OFFSET = 'Invalid offset';

/** Pier's answer about an upload (docs/protocol.md "Upload"). */
export interface UploadRecord {
  id: string;
  offset: number;
  file_relative_path: string;
  file_type: string;
  file_size: number;
  storage_path: string;
}

export interface UploadProgress {
  /** Bytes Pier has acknowledged (on its disk). */
  loaded: number;
  total: number;
  id: string;
}

export interface UploadOptions {
  /** Pier's upload listener for this app, e.g. `https://chat.alice.example.com:40030` (the page's host name). */
  endpoint: string;
  /** The folder, in the app's view, inside the manifest's `upload.dest`. */
  storagePath: string;
  /** Path under `storagePath` (default: the file's name). */
  relativePath?: string;
  /** Extension or MIME type; empty takes the name's extension (default). */
  fileType?: string;
  /** Bytes per PATCH (default 8 MiB; Pier takes at most 10 MiB unless configured). */
  chunkSize?: number;
  onProgress?: (progress: UploadProgress) => void;
  signal?: AbortSignal;
  /** Failures in a row (no answer, busy, 5xx) before giving up (default 5). Other 4xx are never retried. */
  maxRetries?: number;
  /** `fail` or `rename` keep an existing file at the target; default replaces it. */
  conflict?: 'replace' | 'rename' | 'fail';
  /** Extra headers (Node: `x-authorization`; a browser sends the `auth_token` cookie). */
  headers?: Record<string, string>;
  /** Default `include`, so the user's cookie goes with every request. */
  credentials?: RequestCredentials;
  fetch?: typeof fetch;
}

const MiB = 1024 * 1024;

/**
 * Uploads `file` in chunks, resumably: the first POST names the target, and Pier answers the
 * unfinished upload to the same target with its offset if there is one, so calling `upload` again
 * after a reload or a crash carries on where Pier's disk is. A PATCH that fails for want of an
 * answer, a busy upload or a server error is tried again after a backoff, from the offset Pier
 * reports; at most `maxRetries` failures in a row. A refusal (other 4xx) is thrown at once, typed.
 */
export async function upload(file: Blob & { name?: string }, options: UploadOptions): Promise<UploadRecord> {
  const doFetch = options.fetch ?? fetch;
  const base = options.endpoint.replace(/\/+$/, '');
  const chunkSize = options.chunkSize ?? 8 * MiB;
  const maxRetries = options.maxRetries ?? 5;
  const name = options.relativePath ?? file.name;
  if (!name) throw new TypeError('relativePath: is needed when the file has no name');
  if (!(chunkSize > 0)) throw new TypeError('chunkSize: must be a positive number of bytes');

  const request = async (method: string, path: string, body?: FormData): Promise<UploadRecord | undefined> => {
    let res: Response;
    try {
      res = await doFetch(`${base}${path}`, { method, body, headers: options.headers, credentials: options.credentials ?? 'include', signal: options.signal });
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason;
      throw new NetworkError(`upload: ${method} ${path} got no answer`, { cause: err });
    }
    const answer = (await readJson(res)) as { code?: unknown; data?: UploadRecord } | undefined;
    if (!res.ok || answer?.code !== 0) throw errorFromAnswer(res.ok ? 502 : res.status, answer, `upload ${method}`);
    return answer.data;
  };
  // Runs `step` until it succeeds, a refusal is thrown, or `maxRetries` failures came in a row.
  const retrying = async <T>(step: () => Promise<T>): Promise<T> => {
    for (let failures = 0; ; failures++) {
      try {
        return await step();
      } catch (err) {
        if (!(err instanceof PierError) || !err.retryable || failures >= maxRetries) throw err;
        await sleep(backoffDelay(failures, { baseMs: 500, maxMs: 10_000 }), options.signal);
      }
    }
  };

  const form = new FormData();
  form.append('storage_path', options.storagePath);
  form.append('file_relative_path', name);
  form.append('file_type', options.fileType ?? '');
  form.append('file_size', String(file.size));
  if (options.conflict) form.append('conflict', options.conflict);
  let record = await retrying(() => request('POST', '/upload/', form));
  if (!record) throw new TypeError('relativePath: names a folder (ends with "/"); use it to create folders, not files');
  const id = record.id;
  options.onProgress?.({ loaded: record.offset, total: file.size, id });

  let offsetMoves = 0;
  while (record.offset < file.size) {
    const offset = record.offset;
    try {
      record = await retrying(async () => {
        const patch = new FormData();
        patch.append('upload_offset', String(offset));
        patch.append('file', file.slice(offset, Math.min(offset + chunkSize, file.size)), name.split('/').pop());
        try {
          return (await request('PATCH', `/upload/${id}`, patch))!;
        } catch (err) {
          // A failed PATCH may have been written in part: ask Pier where it stands before trying again.
          if (err instanceof PierError && err.retryable) {
            const now = await request('GET', `/upload/${id}`).catch(() => undefined);
            if (now && now.offset !== offset) return now;
          }
          throw err;
        }
      });
    } catch (err) {
      // "Invalid offset": Pier holds more (or less) than we thought; carry on from its offset, a bounded number of times.
      const current = err instanceof PierError && err.message === INVALID_OFFSET ? (err.data as UploadRecord | undefined) : undefined;
      if (!current || typeof current.offset !== 'number' || ++offsetMoves > maxRetries) throw err;
      record = current;
    }
    options.onProgress?.({ loaded: record.offset, total: file.size, id });
  }
  return record;
}

export interface FolderProgress extends UploadProgress {
  /** The file being uploaded, by its relative path. */
  file: string;
  /** Acknowledged bytes of every file so far, and their total. */
  loadedAll: number;
  totalAll: number;
}

/**
 * Uploads files picked with `<input type="file" webkitdirectory>` (or dropped), one after the
 * other, each under its `webkitRelativePath`; folders are created on the way. Answers every record.
 */
export async function uploadFolder(
  files: Iterable<File>,
  options: Omit<UploadOptions, 'relativePath' | 'onProgress'> & { onProgress?: (p: FolderProgress) => void },
): Promise<UploadRecord[]> {
  const list = [...files];
  const totalAll = list.reduce((n, f) => n + f.size, 0);
  const records: UploadRecord[] = [];
  let done = 0;
  for (const file of list) {
    const relativePath = (file as File & { webkitRelativePath?: string }).webkitRelativePath || file.name;
    const record = await upload(file, {
      ...options,
      relativePath,
      onProgress: (p) => options.onProgress?.({ ...p, file: relativePath, loadedAll: done + p.loaded, totalAll }),
    });
    done += file.size;
    records.push(record);
  }
  return records;
}
