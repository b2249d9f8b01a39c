import test from 'ava';
import { byteCount, metaText, parseChecksum, parseMetadata } from '../../../edge/upload/tus-headers.js';
import { TusRefusal } from '../../../edge/upload/tus-errors.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

test('Upload-Metadata: pairs decoded, a key alone is an empty value, absent is empty', (t) => {
  t.deepEqual({ ...parseMetadata(`filename ${b64('a b.bin')},filetype ${b64('text/plain')},flag`) }, { filename: 'a b.bin', filetype: 'text/plain', flag: '' });
  t.deepEqual({ ...parseMetadata(undefined) }, {});
  t.deepEqual({ ...parseMetadata(' ') }, {});
  t.is(parseMetadata(`name ${b64('ünïcode.txt')}`).name, 'ünïcode.txt');
});

test('hostile Upload-Metadata: too long, too many keys, bad keys, duplicates, not base64, NUL or invalid UTF-8: each a 400 naming the header', (t) => {
  const refused = (header: string, message: RegExp) => {
    const err = t.throws(() => parseMetadata(header), { instanceOf: TusRefusal });
    t.is(err?.status, 400);
    t.regex(err?.message ?? '', message, header.slice(0, 40));
    t.regex(err?.message ?? '', /^Upload-Metadata/);
  };
  refused(`filename ${b64('x'.repeat(4000))}`, /at most 4096 bytes/);
  refused(Array.from({ length: 33 }, (_, i) => `k${i}`).join(','), /at most 32 keys/);
  refused(`bad key ${b64('x')}`, /each entry is a key/);
  refused(`bad,key ${b64('x')}`.replace(',', ',,'), /each entry is a key/);
  refused(`__proto__x! ${b64('x')}`, /each entry is a key/);
  refused(`a ${b64('1')},a ${b64('2')}`, /appears twice/);
  refused('a Zm9v=', /not base64/);
  refused('a ****', /not base64/);
  refused(`a ${b64('x\0y')}`, /not UTF-8 text/);
  refused(`a ${Buffer.from([0xff, 0xfe]).toString('base64')}`, /not UTF-8 text/);
});

test('a key like __proto__ is plain data, never a prototype change', (t) => {
  const meta = parseMetadata(`__proto__ ${b64('x')},constructor ${b64('y')}`);
  t.is(meta.__proto__ as unknown, 'x');
  t.is(Object.getPrototypeOf(meta), null);
  t.is(({} as Record<string, unknown>).x, undefined);
});

test('Upload-Checksum: the three algorithms with digests of their length; anything else a 400', (t) => {
  const sha1 = Buffer.alloc(20, 1).toString('base64');
  t.deepEqual(parseChecksum(`sha1 ${sha1}`), { algorithm: 'sha1', digest: Buffer.alloc(20, 1) });
  t.is(parseChecksum(`md5 ${Buffer.alloc(16).toString('base64')}`)?.algorithm, 'md5');
  t.is(parseChecksum(`sha256 ${Buffer.alloc(32).toString('base64')}`)?.algorithm, 'sha256');
  t.is(parseChecksum(undefined), null);
  for (const bad of ['crc32 AAAA', 'sha1', `sha1 ${Buffer.alloc(19).toString('base64')}`, `sha256 ${sha1}`, `sha1 ${sha1} extra`, 'sha1 not-base64!', `SHA1 ${sha1}`]) {
    const err = t.throws(() => parseChecksum(bad), { instanceOf: TusRefusal }, bad);
    t.regex(err?.message ?? '', /^Upload-Checksum/);
  }
});

test('lengths and offsets: digits only, safe integers; absent is undefined', (t) => {
  t.is(byteCount('0', 'Upload-Offset'), 0);
  t.is(byteCount('9007199254740991', 'Upload-Length'), 9007199254740991);
  t.is(byteCount(undefined, 'Upload-Length'), undefined);
  for (const bad of ['-1', '1.5', '1e3', ' 1', '0x10', '', '99999999999999999']) t.throws(() => byteCount(bad, 'Upload-Length'), { message: /^Upload-Length: must be a non-negative integer/ }, bad);
});

test('metaText: the first key with something to say; empty, "null" and "undefined" say nothing', (t) => {
  t.is(metaText({ relativePath: 'null', filename: 'a.bin' }, 'relativePath', 'filename'), 'a.bin');
  t.is(metaText({ relativePath: 'dir/a.bin', filename: 'a.bin' }, 'relativePath', 'filename'), 'dir/a.bin');
  t.is(metaText({ name: '' }, 'filename', 'name'), undefined);
  t.is(metaText({ name: 'undefined' }, 'name'), undefined);
});
