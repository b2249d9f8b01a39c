// The example's backend: a chat room per user that uses each of Pier's services through the SDK.
//   - the gateway: every message a browser sends comes here as a signed callback; it is sent back
//     to all of the user's open pages (to the user, so Pier keeps it: a page offline then gets it
//     when it reconnects);
//   - the vault: the room's motto is a secret, created on first start and read from the vault;
//   - a provider: "/quote" asks the quotes app (another app, through Pier) for a quote;
//   - upload: the page uploads files straight to Pier; it announces each finished one here.
// Environment: OS_SYSTEM_SERVER, OS_APP_KEY, OS_APP_SECRET (injected at install), PIER_GATEWAY_URL,
// CHAT_PORT, and for the page: CHAT_WS_URL, CHAT_UPLOAD_URL, CHAT_STORAGE_PATH, CHAT_LOGIN_TOKEN.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PierApp, CallbackReceiver, NotFoundError } from '@pier/sdk/server';

const here = fileURLToPath(new URL('.', import.meta.url));
const sdkDist = fileURLToPath(new URL('../../sdk/dist/', import.meta.url));
const env = process.env;

const pier = PierApp.fromEnv();
const vault = pier.vault('chat');
const quotes = pier.provider({ dataType: 'quotes', group: 'api.quotes', version: 'v2' });

// The motto lives in the vault: made once, read on every start.
let motto;
try {
  motto = (await vault.get('motto')).value;
} catch (err) {
  if (!(err instanceof NotFoundError)) throw err;
  await vault.create('motto', 'Say what you mean; the vault keeps this line.');
  motto = (await vault.get('motto')).value;
}

const say = (user, from, text) => pier.gateway.send({ users: [user] }, { event: 'chat', data: { from, text } });

const callbacks = new CallbackReceiver(env.OS_APP_SECRET, async (ev) => {
  if (ev.action === 'open') {
    await pier.gateway.send({ connId: ev.connId }, { event: 'welcome', data: { motto, user: ev.userName } });
    return;
  }
  if (ev.action !== 'message') return;
  const frame = ev.data; // the browser's {event, data}
  if (frame?.event === 'chat' && typeof frame.data?.text === 'string') {
    const text = frame.data.text.slice(0, 2000);
    if (text.trim() === '/quote') {
      const { quote } = await quotes.callJson('random');
      await say(ev.userName, 'quotes', quote);
    } else {
      await say(ev.userName, ev.userName, text);
    }
  } else if (frame?.event === 'uploaded' && typeof frame.data?.name === 'string') {
    await say(ev.userName, 'upload', `${frame.data.name} (${Number(frame.data.size)} bytes) is in ${env.CHAT_STORAGE_PATH}`);
  }
});
const onCallback = callbacks.handler();

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css' };

async function serveFile(res, root, path) {
  const file = normalize(join(root, path));
  // Inside `root` itself, not merely a path that starts with its name (`public-old/`).
  if (!file.startsWith(root.endsWith(sep) ? root : root + sep) || !(extname(file) in TYPES)) return res.writeHead(404).end();
  try {
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': TYPES[extname(file)], 'cache-control': 'no-store' }).end(body);
  } catch {
    res.writeHead(404).end();
  }
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  if (req.method === 'POST' && url.pathname === '/cb') return onCallback(req, res);
  if (req.method !== 'GET') return res.writeHead(405).end();
  if (url.pathname === '/') {
    // Stands in for the platform's login, which gives the browser the user's auth_token cookie.
    res.setHeader('set-cookie', `auth_token=${env.CHAT_LOGIN_TOKEN}; Path=/; SameSite=Lax; HttpOnly`);
    return serveFile(res, join(here, 'public'), 'index.html');
  }
  if (url.pathname === '/config') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ wsUrl: env.CHAT_WS_URL, uploadUrl: env.CHAT_UPLOAD_URL, storagePath: env.CHAT_STORAGE_PATH }));
  }
  if (url.pathname.startsWith('/sdk/')) return serveFile(res, sdkDist, url.pathname.slice('/sdk/'.length));
  return serveFile(res, join(here, 'public'), url.pathname.slice(1));
});
server.listen(Number(env.CHAT_PORT ?? 3010), '127.0.0.1', () => process.stdout.write(`chat listening on ${server.address().port}\n`));
