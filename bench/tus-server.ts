import { createServer } from 'node:http';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';

/** The reference: @tus/server with its file store, on the same machine and disk. argv: <dir> */
const tus = new Server({ path: '/files', datastore: new FileStore({ directory: process.argv[2] }) });
const http = createServer((req, res) => void tus.handle(req, res));
http.keepAliveTimeout = 60_000;
http.listen(0, '127.0.0.1', () => process.stdout.write(`${(http.address() as { port: number }).port}\n`));
