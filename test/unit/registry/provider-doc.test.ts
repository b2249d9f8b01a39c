import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { PierError } from '../../../bus/errors.js';
import { parseProviderDocs } from '../../../actors/registry/provider-doc.js';
import { ROOT } from '../../helpers/pier.js';

const example = readFileSync(join(ROOT, 'examples', 'ProviderRegistry.yaml'), 'utf8');
const variant = (change: (d: any) => void) => {
  const d = parse(example);
  change(d);
  return stringify(d);
};

test('the example ProviderRegistry is valid for its user', (t) => {
  const [doc] = parseProviderDocs([example], 'alice');
  t.is(doc.name, 'provider-notes-alice');
  t.is(doc.version, 'v2');
  t.is(doc.endpoint, 'notes-svc.notes-alice:8080');
  t.deepEqual(doc.opApis.map((o) => o.name), ['getNote', 'listNotes']);
});

test('several documents in one file are all read', (t) => {
  const second = variant((d) => {
    d.metadata.name = 'provider-notes-two';
    d.spec.group = 'api.notes2';
  });
  t.is(parseProviderDocs([`${example}\n---\n${second}`], 'alice').length, 2);
});

const invalid: Array<[string, string, string, string?]> = [
  ['a namespace of another user', example, 'provider[0]: metadata.namespace: must be user-system-bob', 'bob'],
  ['the wrong kind', variant((d) => (d.kind = 'Deployment')), 'provider[0]: kind: must be ProviderRegistry'],
  ['a bad apiVersion', variant((d) => (d.apiVersion = 'v1')), 'provider[0]: apiVersion: must be sys.<platform_domain>/v1alpha1'],
  ['spec.kind not provider', variant((d) => (d.spec.kind = 'consumer')), 'provider[0]: spec.kind: must be provider'],
  ['an unknown spec.version', variant((d) => (d.spec.version = 'v9')), 'provider[0]: spec.version: must be one of v1, v2'],
  ['an endpoint without a port', variant((d) => (d.spec.endpoint = 'notes-svc.notes-alice')), 'provider[0]: spec.endpoint: must be host:port'],
  ['an endpoint port out of range', variant((d) => (d.spec.endpoint = 'notes:99999')), 'provider[0]: spec.endpoint: port must be 1-65535'],
  ['an endpoint with a path', variant((d) => (d.spec.endpoint = 'http://notes:80/x')), 'provider[0]: spec.endpoint: must be host:port'],
  ['empty opApis', variant((d) => (d.spec.opApis = [])), 'provider[0]: spec.opApis: must be a non-empty array'],
  ['duplicate op names', variant((d) => (d.spec.opApis[1].name = 'getNote')), 'provider[0]: spec.opApis[1].name: duplicates spec.opApis[0].name "getNote"'],
  ['a uri without a leading slash', variant((d) => (d.spec.opApis[0].uri = 'api/notes')), 'provider[0]: spec.opApis[0].uri: must be a path starting with /'],
  ['an op without a uri', variant((d) => delete d.spec.opApis[0].uri), 'provider[0]: spec.opApis[0].uri: is required'],
  ['a metadata.name that is not a DNS name', variant((d) => (d.metadata.name = 'Provider_Notes')), 'provider[0]: metadata.name: must be a DNS name'],
  ['no spec at all', variant((d) => delete d.spec), 'provider[0]: spec: is required'],
];

for (const [what, text, message, user] of invalid) {
  test(`provider refused: ${what}`, (t) => {
    const err = t.throws(() => parseProviderDocs([text], user ?? 'alice'), { instanceOf: PierError });
    t.is(err!.code, 'BAD_REQUEST');
    t.true(err!.message.startsWith(message), `got: ${err!.message}`);
  });
}

test('provider refused: the same name twice in one install', (t) => {
  const err = t.throws(() => parseProviderDocs([example, example], 'alice'), { instanceOf: PierError });
  t.regex(err!.message, /provider-notes-alice" is given twice/);
});
