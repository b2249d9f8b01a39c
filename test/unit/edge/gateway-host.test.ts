import test from 'ava';
import { originAllowed, parseAppHost } from '../../../edge/identity/host.js';
import { frameToData } from '../../../edge/gateway/client-frame.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../../edge/http/json-depth.js';
import { encode } from '../../../bus/codec.js';

test('Host: <app>.<user>.<domain>, with or without a port; anything else is refused', (t) => {
  t.deepEqual(parseAppHost('chat.alice.localhost', 'localhost'), { app: 'chat', user: 'alice' });
  t.deepEqual(parseAppHost('Chat.Alice.Example.COM:8443', 'example.com'), { app: 'chat', user: 'alice' });
  for (const bad of ['alice.localhost', 'x.chat.alice.localhost', 'chat.alice.other', 'chat-1.alice.localhost', '1chat.alice.localhost', '.alice.localhost', 'chat..localhost', '']) {
    t.is(parseAppHost(bad, 'localhost'), null, bad);
  }
});

test('Origin: absent, or the same host name over http(s), any port on either side', (t) => {
  t.true(originAllowed(undefined, 'chat.alice.localhost'));
  t.true(originAllowed('https://chat.alice.localhost', 'chat.alice.localhost'));
  t.true(originAllowed('http://chat.alice.localhost:8080', 'chat.alice.localhost:8080'));
  // The app's dev server on another port; a proxy that drops the port from Host.
  t.true(originAllowed('http://chat.alice.localhost:5173', 'chat.alice.localhost:8080'));
  t.true(originAllowed('https://chat.alice.localhost:8080', 'chat.alice.localhost'));
  t.true(originAllowed('https://Chat.Alice.Localhost', 'chat.alice.localhost:443'));
  t.false(originAllowed('https://chat.bob.localhost', 'chat.alice.localhost'));
  t.false(originAllowed('https://chat.alice.localhost.evil.example', 'chat.alice.localhost'));
  t.false(originAllowed('https://evil.example', 'chat.alice.localhost'));
  t.false(originAllowed('https://chat.alice.localhost', ''));
  t.false(originAllowed('null', 'chat.alice.localhost'));
  t.false(originAllowed('file://chat.alice.localhost', 'chat.alice.localhost'));
});

test('frames: {event, data} as sent; other text raw; binary base64; ping recognised', (t) => {
  const text = (s: string) => frameToData(new TextEncoder().encode(s).buffer as ArrayBuffer, false);
  t.deepEqual(text('{"event":"say","data":{"a":1}}'), { data: { event: 'say', data: { a: 1 } }, ping: false });
  t.deepEqual(text('{"event":"ping","data":{}}'), { data: { event: 'ping', data: {} }, ping: true });
  t.deepEqual(text('[1,2]'), { data: { event: '', data: { raw: '[1,2]' } }, ping: false });
  t.deepEqual(text('{"data":1}'), { data: { event: '', data: { raw: '{"data":1}' } }, ping: false });
  t.deepEqual(text('hello'), { data: { event: '', data: { raw: 'hello' } }, ping: false });
  t.deepEqual(frameToData(new Uint8Array([0, 255]).buffer as ArrayBuffer, true), { data: { event: '', data: { raw: 'AP8=', encoding: 'base64' } }, ping: false });
});

test('frames nested deeper than 64 levels are forwarded raw, never parsed into a structure', (t) => {
  const text = (s: string) => frameToData(new TextEncoder().encode(s).buffer as ArrayBuffer, false);
  const nested = (n: number) => `{"event":"x","data":${'['.repeat(n)}${']'.repeat(n)}}`;
  const deep = nested(6000);
  t.deepEqual(text(deep), { data: { event: '', data: { raw: deep } }, ping: false });
  t.notThrows(() => encode(text(deep).data), 'what is forwarded can be encoded');
  // 63 arrays inside the object: 64 levels, the most that is parsed.
  t.deepEqual((text(nested(MAX_JSON_DEPTH - 1)).data as { event: string }).event, 'x');
  t.is((text(nested(MAX_JSON_DEPTH)).data as { event: string }).event, '');
});

test('nesting depth: brackets inside strings and escaped quotes do not count', (t) => {
  t.false(nestsDeeperThan(`{"a":"${'['.repeat(1000)}"}`, 2));
  t.false(nestsDeeperThan(`{"a":"\\\"${'{'.repeat(100)}"}`, 2));
  t.true(nestsDeeperThan('[[[', 2));
  t.false(nestsDeeperThan('[[]]', 2));
});
