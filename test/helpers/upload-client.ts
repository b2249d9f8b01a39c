import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';

/** A multipart/form-data body, built by hand so tests control every byte (order, truncation). */
export function multipart(parts: Array<[string, string | Buffer]>): { body: Buffer; contentType: string } {
  const boundary = `----pier${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const [name, value] of parts) {
    const file = Buffer.isBuffer(value);
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="blob"\r\nContent-Type: application/octet-stream` : ''}\r\n\r\n`));
    chunks.push(file ? value : Buffer.from(value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export interface UploadAnswer {
  status: number;
  json: any;
}

export class UploadClient {
  /** Over TLS: the host name in SNI, the listener's certificate checked against `ca`. */
  private readonly tls: Agent | undefined;

  constructor(
    readonly port: number,
    readonly host: string,
    readonly token: string,
    ca?: Buffer,
  ) {
    this.tls = ca ? new Agent({ connect: { ca, servername: host.replace(/:\d+$/, '') } }) : undefined;
  }

  private async send(method: 'POST' | 'PATCH' | 'GET', path: string, parts?: Array<[string, string | Buffer]>, extra: Record<string, string> = {}): Promise<UploadAnswer> {
    const mp = parts ? multipart(parts) : null;
    const res = await request(`${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}${path}`, {
      dispatcher: this.tls,
      method,
      headers: { host: this.host, 'x-authorization': this.token, ...(mp ? { 'content-type': mp.contentType } : {}), ...extra },
      body: mp?.body,
    });
    const text = await res.body.text();
    return { status: res.statusCode, json: text ? JSON.parse(text) : undefined };
  }

  create(fields: Record<string, string | number>, extra: Record<string, string> = {}): Promise<UploadAnswer> {
    return this.send('POST', '/upload/', Object.entries(fields).map(([k, v]) => [k, String(v)]), extra);
  }

  patch(id: string, offset: number | string, chunk: Buffer): Promise<UploadAnswer> {
    return this.send('PATCH', `/upload/${encodeURIComponent(id)}`, [['upload_offset', String(offset)], ['file', chunk]]);
  }

  get(id: string): Promise<UploadAnswer> {
    return this.send('GET', `/upload/${encodeURIComponent(id)}`);
  }

  /** Sends a file in PATCHes of `chunkSize`, from offset 0 (or `from`); returns the last answer. */
  async sendAll(id: string, data: Buffer, chunkSize: number, from = 0): Promise<UploadAnswer> {
    let last: UploadAnswer = { status: 0, json: null };
    for (let off = from; off < data.byteLength; off += chunkSize) {
      last = await this.patch(id, off, data.subarray(off, off + chunkSize));
      if (last.status !== 200) return last;
    }
    return last;
  }
}
