import { PierError } from '../../bus/errors.js';
import type { OpApi, ProviderView } from '../../bus/subjects.js';
import { compile, describe, type FieldError } from '../../bus/validation.js';
import { parseYamlDocuments } from './yaml.js';

/** A validated ProviderRegistry document (spec table): a provider before Pier gives it an owner and a state. */
export type ProviderDoc = Omit<ProviderView, 'user' | 'app' | 'state' | 'appliedAt'>;

const SEGMENT = /^[A-Za-z0-9_.-]{1,128}$/;
const DNS_NAME = /^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/;
/** `<service>.<namespace>:<port>` or any `host:port`; the port is checked separately. */
const ENDPOINT = /^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*:(\d{1,5})$/;

const segment = { type: 'string', pattern: SEGMENT, messages: { stringPattern: 'must be 1-128 characters of [A-Za-z0-9_.-]' } };

const check = compile({
  $$strict: false,
  apiVersion: { type: 'string', pattern: /^sys\.[A-Za-z0-9.-]+\/v1alpha1$/, messages: { stringPattern: 'must be sys.<platform_domain>/v1alpha1' } },
  kind: { type: 'equal', value: 'ProviderRegistry' },
  metadata: {
    type: 'object',
    props: {
      name: { type: 'string', max: 253, pattern: DNS_NAME, messages: { stringPattern: 'must be a DNS name (lower-case letters, digits, -)' } },
      namespace: { type: 'string', max: 253 },
    },
  },
  spec: {
    type: 'object',
    props: {
      version: { type: 'enum', values: ['v1', 'v2'] },
      kind: { type: 'equal', value: 'provider' },
      dataType: segment,
      group: segment,
      endpoint: { type: 'string', max: 300, pattern: ENDPOINT, messages: { stringPattern: 'must be host:port' } },
      deployment: { type: 'string', optional: true, max: 253 },
      description: { type: 'string', optional: true, max: 4096 },
      namespace: { type: 'string', optional: true, max: 253 },
      opApis: {
        type: 'array',
        empty: false,
        max: 256,
        items: {
          type: 'object',
          $$strict: false,
          props: {
            name: segment,
            uri: { type: 'string', max: 2048, pattern: /^\/[^\s#]*$/, messages: { stringPattern: 'must be a path starting with /' } },
          },
        },
      },
    },
  },
});

function checkSemantics(doc: Record<string, any>, user: string): FieldError[] {
  const errors: FieldError[] = [];
  const expected = `user-system-${user}`;
  if (doc.metadata.namespace !== expected) errors.push({ field: 'metadata.namespace', message: `must be ${expected}` });
  const port = Number(ENDPOINT.exec(doc.spec.endpoint)?.[5]);
  if (!(port >= 1 && port <= 65535)) errors.push({ field: 'spec.endpoint', message: 'port must be 1-65535' });
  const seen = new Map<string, number>();
  (doc.spec.opApis as OpApi[]).forEach((op, i) => {
    if (seen.has(op.name)) errors.push({ field: `spec.opApis[${i}].name`, message: `duplicates spec.opApis[${seen.get(op.name)}].name "${op.name}"` });
    seen.set(op.name, i);
  });
  return errors;
}

export function validateProviderDoc(doc: unknown, user: string, what: string): ProviderDoc {
  let errors = check(doc);
  const value = doc as Record<string, any>;
  if (errors.length === 0) errors = checkSemantics(value, user);
  if (errors.length > 0) throw new PierError('BAD_REQUEST', `${what}: ${describe(errors)}`, { data: { errors } });
  const spec = value.spec;
  return {
    name: value.metadata.name,
    namespace: value.metadata.namespace,
    version: spec.version,
    dataType: spec.dataType,
    group: spec.group,
    endpoint: spec.endpoint,
    deployment: spec.deployment ?? '',
    description: spec.description ?? '',
    opApis: spec.opApis.map((op: OpApi) => ({ name: op.name, uri: op.uri })),
  };
}

/** Each text may hold several `---`-separated documents; every one must be a ProviderRegistry. */
export function parseProviderDocs(texts: string[], user: string): ProviderDoc[] {
  const docs: ProviderDoc[] = [];
  texts.forEach((text, f) => {
    parseYamlDocuments(text, `provider[${f}]`).forEach((doc, d, all) => {
      const what = all.length > 1 ? `provider[${f}] document ${d + 1}` : `provider[${f}]`;
      docs.push(validateProviderDoc(doc, user, what));
    });
  });
  const names = new Set<string>();
  for (const doc of docs) {
    if (names.has(doc.name)) throw new PierError('BAD_REQUEST', `provider: metadata.name "${doc.name}" is given twice`);
    names.add(doc.name);
  }
  return docs;
}
