import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { PierError } from '../../../bus/errors.js';
import { parseManifest } from '../../../actors/registry/manifest.js';
import { ROOT } from '../../helpers/pier.js';

const example = readFileSync(join(ROOT, 'examples', 'PlatformManifest.yaml'), 'utf8');

/** The example manifest with one change applied, as YAML text. */
function variant(change: (m: any) => void): string {
  const m = structuredClone(parseYaml(example));
  change(m);
  return stringify(m);
}


test('the example manifest is valid and keeps every field', (t) => {
  const m = parseManifest(example);
  t.is(m.name, 'chat');
  t.is(m.version, '1.0.0');
  t.is(m.grants.length, 2);
  t.deepEqual(m.grants[1], { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'listNotes'], appName: 'notes', port: 8080, svc: 'notes-svc', namespace: 'notes-alice' });
  t.deepEqual(m.websocket, { url: '/ws/message', port: 3010 });
  t.deepEqual(m.upload, { fileType: ['pdf', 'csv', '.png'], dest: '/data/chat', limitedSize: 104857600 });
});

test("upload.dest is normalised in the app's view (doubled and trailing slashes)", (t) => {
  t.is(parseManifest(variant((m) => (m.upload.dest = '/data//chat/'))).upload?.dest, '/data/chat');
  t.is(parseManifest(variant((m) => (m.upload.dest = '/'))).upload?.dest, '/');
  t.is(parseManifest(variant((m) => (m.upload.dest = '/a..b/./c'))).upload?.dest, '/a..b/c');
});

test('optional sections may be absent; limitedSize defaults to 4 GiB', (t) => {
  const m = parseManifest(variant((x) => {
    delete x.permission;
    delete x.options;
    delete x.upload.limitedSize;
  }));
  t.deepEqual(m.grants, []);
  t.is(m.websocket, null);
  t.is(m.upload?.limitedSize, 4 * 1024 ** 3);
});

test('provider grants without port, svc or namespace install, v1 as the platform docs write it and v2', (t) => {
  const v1 = `metadata:
  name: reader
permission:
  sysData:
    - dataType: legacy_notes
      group: api.notes
      version: v1
      ops: [getNote]
`;
  t.deepEqual(parseManifest(v1).grants, [{ dataType: 'legacy_notes', group: 'api.notes', version: 'v1', ops: ['getNote'] }]);
  const v2 = parseManifest(variant((m) => {
    delete m.permission.sysData[1].port;
    delete m.permission.sysData[1].svc;
    delete m.permission.sysData[1].namespace;
  }));
  t.deepEqual(v2.grants[1], { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['getNote', 'listNotes'], appName: 'notes' });
});

/** [what is wrong, manifest text, the message it must start with] */
const invalid: Array<[string, string, string]> = [
  ['malformed YAML', 'metadata: [name: chat', 'manifest: invalid YAML'],
  ['a duplicate key', 'metadata:\n  name: a\n  name: b\n', 'manifest: invalid YAML'],
  ['an empty document', '# nothing\n', 'manifest: the document is empty'],
  ['a list instead of a mapping', '- a\n- b\n', 'manifest: body: must be an object'],
  ['no metadata', variant((m) => delete m.metadata), 'manifest: metadata: is required'],
  ['an app name with illegal characters', variant((m) => (m.metadata.name = 'Chat_App')), 'manifest: metadata.name: must be 1 to 31 characters: a lowercase letter, then lowercase letters or digits (no dashes)'],
  ['an app name that is too long', variant((m) => (m.metadata.name = 'a'.repeat(32))), 'manifest: metadata.name: must be 1 to 31 characters: a lowercase letter, then lowercase letters or digits (no dashes)'],
  ['sysData not a list', variant((m) => (m.permission.sysData = 'secret')), 'manifest: permission.sysData: must be an array'],
  ['empty ops', variant((m) => (m.permission.sysData[1].ops = [])), 'manifest: permission.sysData[1].ops: must be a non-empty array'],
  ['duplicate ops', variant((m) => (m.permission.sysData[1].ops = ['getNote', 'getNote'])), 'manifest: permission.sysData[1].ops: must not contain duplicates'],
  ['an unknown secret op', variant((m) => (m.permission.sysData[0].ops = ['StealSecret?workspace=chat'])), 'manifest: permission.sysData[0].ops[0]: must be one of'],
  ['a secret op without a workspace', variant((m) => (m.permission.sysData[0].ops = ['RetrieveSecret'])), 'manifest: permission.sysData[0].ops[0]: must be one of'],
  ['a vault grant of version v2', variant((m) => (m.permission.sysData[0].version = 'v2')), 'manifest: permission.sysData[0].version: must be v1'],
  ['a provider version that does not exist', variant((m) => (m.permission.sysData[1].version = 'v3')), 'manifest: permission.sysData[1].version: must be one of v1, v2'],
  ['a v2 provider grant without appName', variant((m) => delete m.permission.sysData[1].appName), 'manifest: permission.sysData[1].appName: is required for version v2'],
  ['a provider port that is a string', variant((m) => (m.permission.sysData[1].port = 'http')), 'manifest: permission.sysData[1].port: must be a number'],
  ['a provider port out of range', variant((m) => (m.permission.sysData[1].port = 70000)), 'manifest: permission.sysData[1].port: must be at most 65535'],
  ['a dataType with a slash', variant((m) => (m.permission.sysData[1].dataType = 'a/b')), 'manifest: permission.sysData[1].dataType: must be 1-128 characters'],
  ['an unknown key in a grant', variant((m) => (m.permission.sysData[1].opz = ['x'])), 'manifest: permission.sysData[1]: has unknown keys: opz'],
  ['two grants for one target', variant((m) => m.permission.sysData.push(structuredClone(m.permission.sysData[1]))), 'manifest: permission.sysData[2]: repeats (dataType, group, version) of permission.sysData[1]'],
  ['a websocket url without a leading slash', variant((m) => (m.options.websocket.url = 'ws/message')), 'manifest: options.websocket.url: must be a path starting with /'],
  ['a websocket port of 0', variant((m) => (m.options.websocket.port = 0)), 'manifest: options.websocket.port: must be at least 1'],
  ['an upload dest that is relative', variant((m) => (m.upload.dest = 'data/chat')), 'manifest: upload.dest: must be an absolute path without .. segments, NUL or backslash'],
  ['an upload dest that climbs', variant((m) => (m.upload.dest = '/data/../../etc')), 'manifest: upload.dest: must be an absolute path without .. segments, NUL or backslash'],
  ['an upload dest ending in ..', variant((m) => (m.upload.dest = '/data/..')), 'manifest: upload.dest: must be an absolute path without .. segments, NUL or backslash'],
  ['an empty fileType list', variant((m) => (m.upload.fileType = [])), 'manifest: upload.fileType: must be a non-empty array'],
  ['a negative limitedSize', variant((m) => (m.upload.limitedSize = -1)), 'manifest: upload.limitedSize: must be a positive number'],
  ['a fractional limitedSize', variant((m) => (m.upload.limitedSize = 1.5)), 'manifest: upload.limitedSize: must be an integer'],
];

for (const [what, text, message] of invalid) {
  test(`manifest refused: ${what}`, (t) => {
    const err = t.throws(() => parseManifest(text), { instanceOf: PierError });
    t.is(err!.code, 'BAD_REQUEST');
    t.true(err!.message.startsWith(message), `got: ${err!.message}`);
  });
}

test('every error is reported with its path, not only the first', (t) => {
  const err = t.throws(() => parseManifest(variant((m) => {
    m.options.websocket.port = 'x';
    m.upload.dest = 'rel';
  })), { instanceOf: PierError });
  const fields = (err!.data as { errors: { field: string }[] }).errors.map((e) => e.field);
  t.deepEqual(fields.sort(), ['options.websocket.port', 'upload.dest']);
  t.regex(err!.message, /^manifest: options\.websocket\.port: must be a number; upload\.dest: must be an absolute path/);
});

test('four mistakes in four places, grants included, are all named in the one message', (t) => {
  const err = t.throws(() => parseManifest(variant((m) => {
    m.metadata.name = 'Chat_App';
    m.permission.sysData[0].ops = ['StealSecret?workspace=chat'];
    m.permission.sysData[1].version = 'v3';
    m.upload.callback = '/uploaded';
    delete m.options.websocket.port;
  })), { instanceOf: PierError });
  const fields = (err!.data as { errors: { field: string }[] }).errors.map((e) => e.field);
  t.deepEqual(fields.sort(), ['metadata.name', 'options.websocket.port', 'permission.sysData[0].ops[0]', 'permission.sysData[1].version', 'upload.callback']);
  for (const f of fields) t.true(err!.message.includes(`${f}: `), `${f} in: ${err!.message}`);
});

test('hostile: a manifest with hundreds of mistakes answers a bounded message', (t) => {
  const err = t.throws(() => parseManifest(variant((m) => {
    m.permission.sysData = Array.from({ length: 64 }, () => ({ dataType: 'a/b', group: 'g', version: 'v9', ops: [] }));
  })), { instanceOf: PierError });
  t.true((err!.data as { errors: unknown[] }).errors.length > 100);
  t.regex(err!.message, /\(and \d+ more\)$/);
  t.true(err!.message.length < 2_000, `${err!.message.length} characters`);
});

test('YAML alias bombs are refused, not expanded', (t) => {
  const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
  for (let i = 1; i < 12; i++) lines.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)},*${String.fromCharCode(96 + i)}]`);
  const bomb = `${lines.join('\n')}\nmetadata: {name: chat}\n`;
  const err = t.throws(() => parseManifest(bomb));
  t.true(err instanceof Error);
});

test('options.websocket.history: false, or bounds that are positive integers and nothing else; absent keeps the operator\'s', (t) => {
  t.is(parseManifest(example).websocket!.history, undefined);
  t.is(parseManifest(variant((m) => (m.options.websocket.history = false))).websocket!.history, false);
  t.deepEqual(parseManifest(variant((m) => (m.options.websocket.history = { messages: 5, ttl: 30 }))).websocket!.history, { messages: 5, ttl: 30 });
  for (const bad of [true, 'off', { messages: 0 }, { bytes: -1 }, { ttl: 1.5 }, { messages: 5, forever: true }, [1]]) {
    const err = t.throws(() => parseManifest(variant((m) => (m.options.websocket.history = bad))), { instanceOf: PierError }, JSON.stringify(bad));
    t.true((err!.data as { errors: { field: string }[] }).errors.every((e) => e.field.startsWith('options.websocket.history')), `${JSON.stringify(bad)}: ${err!.message}`);
  }
});
