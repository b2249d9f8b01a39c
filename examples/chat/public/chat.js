// The example's page: the gateway and upload through the SDK's browser part, nothing else.
import { connectGateway, upload } from '/sdk/browser/index.js';

const $ = (id) => document.getElementById(id);
const config = await (await fetch('/config')).json();

const status = (state) => {
  $('status').dataset.state = state;
  $('status').textContent = state;
};
const line = (from, text) => {
  const li = document.createElement('li');
  li.textContent = `${from}: ${text}`;
  $('log').append(li);
};

// Recovery is on by default: after a reconnect, what was said while this page was offline arrives
// as ordinary messages, none twice.
const conn = connectGateway(config.wsUrl);
let reconnected = false;
conn.on('open', () => status('open'));
conn.on('reconnecting', () => (reconnected = true));
conn.on('recovery', ({ recovered, reason }) => {
  // `new` is a first connection, and a first connection has nothing to catch up on whatever the
  // reason; after a reconnect, `false` means messages were missed that cannot be replayed. The app
  // keeps no log of its own to reload the page from, so the page says so.
  if (recovered || reason === 'new' || !reconnected) return;
  $('notice').textContent = `Messages sent while you were offline may be missing (${reason}).`;
  $('notice').hidden = false;
});
conn.on('close', ({ reconnecting }) => status(reconnecting ? 'reconnecting' : 'closed'));
conn.on('message', (msg) => {
  if (msg?.event === 'welcome') $('motto').textContent = msg.data.motto;
  if (msg?.event === 'chat') line(msg.data.from, msg.data.text);
});

$('say').addEventListener('submit', (e) => {
  e.preventDefault();
  conn.send('chat', { text: $('text').value });
  $('text').value = '';
});

$('file').addEventListener('change', async () => {
  const file = $('file').files[0];
  if (!file) return;
  $('upload-status').textContent = 'uploading';
  try {
    await upload(file, {
      endpoint: config.uploadUrl,
      storagePath: config.storagePath,
      chunkSize: 1024 * 1024,
      onProgress: ({ loaded, total }) => {
        $('progress').max = total || 1;
        $('progress').value = loaded;
        $('upload-status').textContent = `${loaded} / ${total} bytes`;
      },
    });
    $('upload-status').textContent = 'done';
    conn.send('uploaded', { name: file.name, size: file.size });
  } catch (err) {
    $('upload-status').textContent = `failed: ${err.message}`;
  }
});
