import { PierError } from '../../bus/errors.js';
import { APP_NAME_RULE, APP_NAME, APP_VIEW_PATH, historyOptionsRule, type Grant, type UploadOptions, type WebsocketOptions } from '../../bus/subjects.js';
import { compile, describeAll, type FieldError } from '../../bus/validation.js';
import { normalisedDest } from './dest-nesting.js';
import { parseYamlDocument } from './yaml.js';

/** What Pier keeps of a PlatformManifest.yaml (docs/protocol.md "Manifest"). Other keys are ignored. */
export interface Manifest {
  name: string;
  version: string;
  grants: Grant[];
  websocket: WebsocketOptions | null;
  upload: UploadOptions | null;
}

// The platform's five and those of versions (bus/subjects-vault.ts), which an app has only when it declares them.
export const SECRET_OPS = ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret', 'ListSecretVersions', 'RetrieveSecretVersion', 'RestoreSecretVersion'] as const;
export const WORKSPACE = /^[A-Za-z0-9_.-]{1,64}$/;
const SECRET_OP = new RegExp(`^(${SECRET_OPS.join('|')})\\?workspace=[A-Za-z0-9_.-]{1,64}$`);
/** dataType, group and op names travel as URL path segments: keep them to safe characters. */
const SEGMENT = /^[A-Za-z0-9_.-]{1,128}$/;
export const DEFAULT_LIMITED_SIZE = 4 * 1024 ** 3;

const segment = (what: string) => ({ type: 'string', pattern: SEGMENT, messages: { stringPattern: `must be 1-128 characters of [A-Za-z0-9_.-] (${what})` } });
const port = { type: 'number', integer: true, min: 1, max: 65535 };

const checkTop = compile({
  $$strict: false,
  metadata: {
    type: 'object',
    props: {
      name: { type: 'string', pattern: APP_NAME, messages: { stringPattern: APP_NAME_RULE } },
      version: { type: 'string', convert: true, min: 1, max: 64, optional: true },
    },
  },
  permission: {
    type: 'object',
    optional: true,
    props: { sysData: { type: 'array', optional: true, max: 64, items: 'object' } },
  },
  options: {
    type: 'object',
    optional: true,
    props: {
      websocket: {
        type: 'object',
        optional: true,
        props: {
          url: { type: 'string', max: 512, pattern: /^\/[^\s?#]*$/, messages: { stringPattern: 'must be a path starting with /' } },
          port,
          // Gateway history (docs/protocol.md "History and recovery"): false, or bounds that only lower the operator's.
          history: historyOptionsRule({ strict: true }),
        },
      },
    },
  },
  upload: {
    type: 'object',
    optional: true,
    props: {
      fileType: { type: 'array', empty: false, max: 256, items: { type: 'string', min: 1, max: 32, pattern: /^[^\s/\\]+$/ } },
      // A path in the app's view, mapped under the user's folder (docs/protocol.md "Manifest").
      dest: { type: 'string', max: 4096, pattern: APP_VIEW_PATH, messages: { stringPattern: 'must be an absolute path without .. segments, NUL or backslash' } },
      limitedSize: { type: 'number', integer: true, positive: true, optional: true },
      // A path on the app's host, called (signed, retried) for each completed upload.
      callback: { type: 'string', optional: true, max: 512, pattern: /^\/[^\s\\]*$/, messages: { stringPattern: 'must be a path starting with /' } },
      // Its port: this one, or the websocket callbacks' port when absent.
      callbackPort: { type: 'number', integer: true, min: 1, max: 65535, optional: true },
    },
  },
});

const checkSecretGrant = compile({
  $$strict: true,
  dataType: { type: 'equal', value: 'secret' },
  group: { type: 'string', pattern: /^secret\.[a-z][a-z0-9-]{0,62}$/, messages: { stringPattern: 'must be secret.<vault>' } },
  version: { type: 'equal', value: 'v1', messages: { equalValue: 'must be v1 for the secret vault' } },
  ops: {
    type: 'array',
    empty: false,
    unique: true,
    max: 256,
    items: { type: 'string', pattern: SECRET_OP, messages: { stringPattern: `must be one of ${SECRET_OPS.join('|')} followed by ?workspace=<workspace>` } },
  },
});

const checkProviderGrant = compile({
  $$strict: true,
  appName: { type: 'string', optional: true, pattern: APP_NAME, messages: { stringPattern: APP_NAME_RULE } },
  // Optional for every version (the platform's own v1 manifests omit it): Pier dials the
  // ProviderRegistry's endpoint, so port, svc and namespace are kept only as the app declared them.
  port: { ...port, optional: true },
  svc: { type: 'string', optional: true, min: 1, max: 253 },
  namespace: { type: 'string', optional: true, min: 1, max: 253 },
  version: { type: 'enum', values: ['v1', 'v2'] },
  dataType: segment('dataType'),
  group: segment('group'),
  ops: { type: 'array', empty: false, unique: true, max: 256, items: segment('op name') },
});

function checkGrants(entries: Record<string, unknown>[]): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Map<string, number>();
  entries.forEach((entry, i) => {
    const path = `permission.sysData[${i}]`;
    const found = (entry.dataType === 'secret' ? checkSecretGrant : checkProviderGrant)(entry).map((e) => ({ ...e, field: e.field === 'body' ? path : `${path}.${e.field}` }));
    if (found.length === 0 && entry.version === 'v2' && entry.dataType !== 'secret' && entry.appName === undefined) {
      found.push({ field: `${path}.appName`, message: 'is required for version v2' });
    }
    const key = `${entry.dataType}/${entry.group}/${entry.version}`;
    if (found.length === 0 && seen.has(key)) {
      found.push({ field: path, message: `repeats (dataType, group, version) of permission.sysData[${seen.get(key)}]` });
    }
    seen.set(key, i);
    errors.push(...found);
  });
  return errors;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks a parsed manifest; throws one 400 naming every bad field path (a manifest with four
 * mistakes is fixed in one go, not four tries), each also in `data.errors`.
 */
export function validateManifest(doc: unknown): Manifest {
  const errors = [...checkTop(doc)];
  const value = doc as Record<string, any>;
  // The grants are checked whenever they are a list, whatever else is wrong; an entry that is not a
  // mapping is already named by the check above.
  const sysData: unknown = isObject(value) && isObject(value.permission) ? value.permission.sysData : undefined;
  if (Array.isArray(sysData) && sysData.every(isObject)) errors.push(...checkGrants(sysData));
  const upload: unknown = isObject(value) ? value.upload : undefined;
  const websocket: unknown = isObject(value) && isObject(value.options) ? value.options.websocket : undefined;
  if (isObject(upload) && upload.callback !== undefined && upload.callbackPort === undefined && !(isObject(websocket) && websocket.port !== undefined)) {
    errors.push({ field: 'upload.callback', message: 'needs upload.callbackPort, or options.websocket.port to share' });
  }
  if (errors.length > 0) throw new PierError('BAD_REQUEST', `manifest: ${describeAll(errors)}`, { data: { errors } });

  const grants: Grant[] = (value.permission?.sysData ?? []).map((g: Record<string, unknown>) => ({
    dataType: g.dataType,
    group: g.group,
    version: g.version,
    ops: [...(g.ops as string[])],
    ...(g.appName === undefined ? {} : { appName: g.appName }),
    ...(g.port === undefined ? {} : { port: g.port }),
    ...(g.svc === undefined ? {} : { svc: g.svc }),
    ...(g.namespace === undefined ? {} : { namespace: g.namespace }),
  }));
  const ws = value.options?.websocket;
  const up = value.upload;
  return {
    name: value.metadata.name,
    version: value.metadata.version ?? '',
    grants,
    websocket: ws ? { url: ws.url, port: ws.port, ...(ws.history === undefined ? {} : { history: ws.history === false ? false : { ...ws.history } }) } : null,
    upload: up ? { fileType: [...up.fileType], dest: normalisedDest(up.dest), limitedSize: up.limitedSize ?? DEFAULT_LIMITED_SIZE, ...uploadCallback(up, ws) } : null,
  };
}

/** `upload.callback` with its port: its own, or the websocket callbacks' (one of them must be given). */
function uploadCallback(up: { callback?: string; callbackPort?: number }, ws: { port: number } | undefined): { callback?: { url: string; port: number } } {
  if (up.callback === undefined) return {};
  // validateManifest has refused a callback with neither port.
  const port = (up.callbackPort ?? ws?.port) as number;
  return { callback: { url: up.callback, port } };
}

export function parseManifest(text: string): Manifest {
  return validateManifest(parseYamlDocument(text, 'manifest'));
}
