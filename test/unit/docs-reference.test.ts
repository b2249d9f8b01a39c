import test from 'ava';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECRET_VALUE_MAX_BYTES } from '../../bus/subjects.js';
import { loadConfig } from '../../lib/config/config.js';
import { COMMANDS } from '../../cli/commands.js';
import { ENV, INTEGER_SETTINGS } from '../../lib/config/config-env.js';
import { GATEWAY_PATH } from '../../edge/gateway/gateway.js';
import { routeTable } from '../../edge/routes.js';

// docs/protocol.md is the reference for every route, command and setting (issue 39): it is checked
// against the tables the code runs from, both ways, so that a route, command or setting added,
// removed or renamed without the reference fails here.

const reference = readFileSync(fileURLToPath(new URL('../../../docs/protocol.md', import.meta.url)), 'utf8');
/** Path parameters written any way (`:id`, `{id}`, `<id>`) compare equal. */
const shape = (path: string) => path.replace(/:[A-Za-z]+|\{[A-Za-z_]+\}|<[A-Za-z_]+>/g, '{}');
/** A served route as a pattern a documented one may fill in (`secret.<vault>` is one of `{}`). */
const pattern = (route: string) => {
  const [method, path] = route.split(' ');
  const segments = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\}/g, '[^/]+');
  return new RegExp(`^${method === 'ANY' ? '[A-Z]+' : method} ${segments}$`);
};
const METHOD: Record<string, string> = { del: 'DELETE', any: 'ANY' };

/** Routes as `METHOD /path`: every listener's (the CORS preflights aside: documented once, by listener), and the gateway's upgrade. */
function routes(): Set<string> {
  const table = routeTable({ adminBodyBytes: 1, providerBodyBytes: 1, console: {} } as Parameters<typeof routeTable>[0]);
  const out = new Set<string>([`GET ${GATEWAY_PATH}`]);
  for (const rs of Object.values(table)) {
    for (const r of rs) {
      if (r.method === 'options') continue;
      out.add(`${METHOD[r.method] ?? r.method.toUpperCase()} ${shape(r.path)}`);
    }
  }
  return out;
}

/** What the reference lists as routes: code spans `METHOD /path`. */
function documentedRoutes(): Set<string> {
  return new Set([...reference.matchAll(/`(GET|POST|PUT|PATCH|DELETE|HEAD|ANY) (\/[^`\s]*)`/g)].map((m) => `${m[1]} ${shape(m[2])}`));
}

test('every route is in the reference, and the reference lists no route that is not', (t) => {
  const served = routes();
  const documented = documentedRoutes();
  t.deepEqual([...served].filter((r) => !documented.has(r)).sort(), [], 'served, not in docs/protocol.md');
  const patterns = [...served].map(pattern);
  t.deepEqual([...documented].filter((r) => !served.has(r) && !patterns.some((p) => p.test(r))).sort(), [], 'in docs/protocol.md, not served');
});

test('every CLI command is in the reference, and the reference lists no command that is not', (t) => {
  const commands = new Set(['start', ...Object.keys(COMMANDS)]);
  const cli = reference.slice(reference.indexOf('## CLI'), reference.indexOf('## Environment'));
  // Each command appears as `pier <command>` or, after a `·`, as `<command>` in a code span.
  const spans = [...cli.matchAll(/`(?:pier )?([a-z][a-z-]*(?: [a-z][a-z-]*)?)(?:[ \\|[`]|$)/gm)].map((m) => m[1]);
  const documented = new Set(spans.filter((s) => commands.has(s) || commands.has(s.split(' ')[0]) || /^[a-z]+ [a-z-]+$/.test(s)));
  t.deepEqual([...commands].filter((c) => !documented.has(c)).sort(), [], 'commands missing from the CLI table');
  t.deepEqual([...documented].filter((c) => !commands.has(c) && c.includes(' ')).sort(), [], 'in the CLI table, not a command');
});

test('every setting is in the reference\'s environment table, and the table names none Pier does not read', (t) => {
  const env = reference.slice(reference.indexOf('## Environment'));
  const documented = new Set([...env.matchAll(/`((?:PIER|NATS|OTEL)_[A-Z0-9_]+)`/g)].map((m) => m[1]));
  const read = new Set<string>(Object.values(ENV));
  t.deepEqual([...read].filter((v) => !documented.has(v)).sort(), [], 'read, not in the environment table');
  t.deepEqual([...documented].filter((v) => !read.has(v)).sort(), [], 'in the environment table, not read');
});

/** A size or duration as the reference writes it (`64 KiB`, `24 h`, `1800000 (30 min)`), in bytes or ms; null when it is not a number. */
function amount(text: string, variable: string): number | null {
  const m = /^(\d[\d,]*)(?:\s*(KiB|MiB|GiB|h|min|s)\b)?/.exec(text.trim());
  if (!m) return null;
  const n = Number(m[1].replace(/,/g, ''));
  const unit = m[2];
  if (unit === undefined) return n;
  const bytes: Record<string, number> = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
  if (unit in bytes) return n * bytes[unit];
  if (!variable.endsWith('_MS')) return null;
  return n * ({ h: 3_600_000, min: 60_000, s: 1_000 } as Record<string, number>)[unit];
}

/** The environment table's rows: variables (code spans of the first cell) and their defaults, one each when the counts match. */
function documentedDefaults(): Map<string, string> {
  const env = reference.slice(reference.indexOf('## Environment'));
  const out = new Map<string, string>();
  for (const row of env.split('\n').filter((l) => l.startsWith('| `'))) {
    const [vars, defaults] = row.split(' | ').map((c) => c.replace(/^\| /, ''));
    const names = [...vars.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]);
    // `max(5000, 10 × heartbeat)` is one default with a comma inside: commas within parentheses do not split.
    const values = names.length > 1 ? defaults.split(/, (?![^(]*\))/) : [defaults];
    if (values.length !== names.length) continue;
    names.forEach((n, i) => out.set(n, values[i]));
  }
  return out;
}

// Defaults computed at start from something else: the reference says how, not a number.
const COMPUTED = new Set<string>([ENV.bcryptThreads, ENV.registryMaxStalenessMs]);

test("every integer setting's default in the reference is the one the code starts with", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-docs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  INTEGER_SETTINGS.clear();
  loadConfig({ [ENV.dataDir]: dir });
  t.true(INTEGER_SETTINGS.size >= 30, `the start read the integer settings (${INTEGER_SETTINGS.size})`);
  const documented = documentedDefaults();
  const wrong: string[] = [];
  for (const [name, setting] of INTEGER_SETTINGS) {
    if (COMPUTED.has(name)) continue;
    const text = documented.get(name);
    if (text === undefined) wrong.push(`${name}: no default in the environment table (the code's is ${setting.fallback})`);
    else if (amount(text, name) !== setting.fallback) wrong.push(`${name}: the reference says "${text}", the code starts with ${setting.fallback}`);
  }
  t.deepEqual(wrong, []);
});

test("the reference's body limits are the route table's", (t) => {
  const table = routeTable({ adminBodyBytes: 1, providerBodyBytes: 1, console: {} } as Parameters<typeof routeTable>[0]);
  const limitOf = (listener: keyof typeof table, method: string, path: string) => table[listener].find((r) => r.method === method && r.path === path)?.bodyLimit ?? null;
  const bodies = reference.slice(reference.indexOf('**Bodies**'), reference.indexOf('## Identities'));
  const rowOf = (start: string) => bodies.split('\n').find((l) => l.startsWith(`| ${start}`)) ?? '';
  const sizeIn = (row: string, after = '|') => amount(row.slice(row.lastIndexOf(after) + after.length), 'BYTES');
  t.is(sizeIn(rowOf('`POST /permission/v1alpha1/access`'), ' | '), limitOf('system', 'post', '/permission/v1alpha1/access'));
  t.is(sizeIn(rowOf('local API'), ' | '), limitOf('local', 'post', '/runtime/ws/conn/send'));
  t.is(limitOf('local', 'post', '/runtime/ws/conn/close'), limitOf('local', 'post', '/runtime/ws/conn/send'));
  t.is(sizeIn(rowOf('`POST /upload`'), ' | '), limitOf('upload', 'post', '/upload/'));
  t.is(sizeIn(rowOf('admin API'), 'vault value routes '), limitOf('admin', 'put', '/admin/v1/vault/secret'));
  t.is(limitOf('admin', 'put', '/admin/v1/vault/secrets/:name'), limitOf('admin', 'put', '/admin/v1/vault/secret'));
});

test("the reference's secret size is the vault's", (t) => {
  const vaultSection = reference.slice(reference.indexOf('## Vault'), reference.indexOf('## Gateway'));
  const row = vaultSection.split('\n').find((l) => l.startsWith('| `value` |')) ?? '';
  t.is(amount(row.replace(/^.*at most /, ''), 'BYTES'), SECRET_VALUE_MAX_BYTES);
});
