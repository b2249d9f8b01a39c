import test from 'ava';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from '../../cli/commands.js';
import { ENV } from '../../lib/config/config-env.js';
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
