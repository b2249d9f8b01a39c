// A tus-js-client program, unmodified library, as an app's Node backend would run it: uploads one
// file, its upload URL kept in a FileUrlStorage so that a later run resumes it. Run as
// `node tus-child.js <json options>`; prints one JSON line per event (request, progress, done,
// error) for the test reading it. The test kills it mid-chunk, then runs it again to resume.
import { createReadStream } from 'node:fs';
import * as tus from 'tus-js-client';

interface Options {
  endpoint: string;
  host: string;
  token: string;
  file: string;
  storage: string;
  chunkSize: number;
  filename: string;
  resume: boolean;
  /** Kill -9 itself once this many bytes went out (mid-chunk): a client that dies without a word. */
  dieAfter?: number;
}

const o = JSON.parse(process.argv[2]!) as Options;
// FileUrlStorage is exported in Node but missing from the package's types.
const { FileUrlStorage } = tus as unknown as { FileUrlStorage: new (path: string) => tus.UrlStorage };
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const upload = new tus.Upload(createReadStream(o.file), {
  endpoint: o.endpoint,
  chunkSize: o.chunkSize,
  headers: { Host: o.host, 'X-Authorization': o.token },
  metadata: { filename: o.filename, filetype: 'application/octet-stream' },
  urlStorage: new FileUrlStorage(o.storage),
  retryDelays: [0, 200, 500],
  onBeforeRequest: (req) => {
    say({ request: req.getMethod(), offset: req.getHeader('Upload-Offset') ?? null });
  },
  onProgress: (sent, total) => {
    say({ progress: sent, total });
    if (o.dieAfter !== undefined && sent > o.dieAfter) process.kill(process.pid, 'SIGKILL');
  },
  onSuccess: () => {
    say({ done: true, url: upload.url });
    process.exit(0);
  },
  onError: (err) => {
    say({ error: String(err) });
    process.exit(1);
  },
});

const previous = o.resume ? await upload.findPreviousUploads() : [];
say({ previous: previous.length });
if (previous[0]) upload.resumeFromPreviousUpload(previous[0]);
upload.start();
