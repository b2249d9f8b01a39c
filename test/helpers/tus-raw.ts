import { request } from 'undici';

/** One tus request by hand, every header under the test's control (hostile cases, HEAD checks). */
export interface TusAnswer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

export const metadataOf = (meta: Record<string, string>) =>
  Object.entries(meta)
    .map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`)
    .join(',');

export class TusRaw {
  constructor(
    readonly port: number,
    readonly host: string,
    readonly token: string,
  ) {}

  async send(method: string, path: string, headers: Record<string, string> = {}, body?: Buffer): Promise<TusAnswer> {
    const res = await request(`http://127.0.0.1:${this.port}${path}`, {
      method: method as 'GET',
      // A connection of its own per request: these tests look at answers, not at keep-alive.
      reset: true,
      headers: { host: this.host, 'x-authorization': this.token, 'tus-resumable': '1.0.0', ...headers },
      body,
    });
    const text = await res.body.text();
    const flat: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) flat[k] = Array.isArray(v) ? v.join(', ') : String(v);
    return { status: res.statusCode, headers: flat, text };
  }

  /** POST /tus/ for `length` bytes with this metadata; the answer, with `id` from its Location. */
  async create(length: number | null, meta: Record<string, string>, headers: Record<string, string> = {}): Promise<TusAnswer & { id: string }> {
    const lengthHeader: Record<string, string> = length === null ? { 'upload-defer-length': '1' } : { 'upload-length': String(length) };
    const a = await this.send('POST', '/tus/', { ...lengthHeader, 'upload-metadata': metadataOf(meta), ...headers });
    return { ...a, id: (a.headers.location ?? '').replace(/^\/tus\//, '') };
  }

  patch(id: string, offset: number, chunk: Buffer, headers: Record<string, string> = {}): Promise<TusAnswer> {
    return this.send('PATCH', `/tus/${id}`, { 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream', ...headers }, chunk);
  }

  head(id: string): Promise<TusAnswer> {
    return this.send('HEAD', `/tus/${id}`);
  }
}
