import test from 'ava';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from '../helpers/pier.js';

/** Every relative import of the TypeScript sources under `folder`, as [file, imported folder's top]. */
function importsOf(folder: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith('.ts')) {
        for (const m of readFileSync(path, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
          const target = relative(ROOT, resolve(dirname(path), m[1]));
          out.push([relative(ROOT, path), target.split('/').slice(0, target.startsWith('actors/') ? 2 : 1).join('/')]);
        }
      }
    }
  };
  walk(join(ROOT, folder));
  return out;
}

// ARCHITECTURE.md "Layers point down": bus/ imports nothing of Pier; lib/ imports bus/ only; actors
// and the edge import bus/ and lib/ (an actor never another actor); cli/ (the composition root) is on top.
test('layers point down', (t) => {
  const allowed: Record<string, (from: string, to: string) => boolean> = {
    bus: (_f, to) => to === 'bus',
    lib: (_f, to) => to === 'bus' || to === 'lib',
    edge: (_f, to) => ['bus', 'lib', 'edge'].includes(to),
    actors: (from, to) => to === 'bus' || to === 'lib' || to === from.split('/').slice(0, 2).join('/'),
  };
  const wrong: string[] = [];
  for (const [layer, ok] of Object.entries(allowed)) {
    for (const [from, to] of importsOf(layer)) if (!ok(from, to)) wrong.push(`${from} → ${to}`);
  }
  t.deepEqual(wrong, []);
  t.true(importsOf('cli').some(([, to]) => to === 'edge'), 'the composition root is in cli/');
});

/** The product's sources: everything but the tests, the chaos and power-cut runs, the benchmarks, the examples and the scripts. */
const PRODUCT = ['actors', 'bin', 'bus', 'cli', 'console', 'edge', 'lib', 'sdk/src'];

/**
 * Who imports whom among the sources under `root`'s `folders`, file → files (paths from `root`):
 * every relative import, `import type` and `export … from` included, and `import('…')` in code or
 * in a JSDoc type. A `.js` specifier names its `.ts` source when there is one.
 */
function importGraph(root: string, folders: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules') walk(path);
      } else if (/\.(ts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts')) {
        const text = readFileSync(path, 'utf8');
        const specs = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]);
        const targets = specs.map((spec) => {
          const target = resolve(dirname(path), spec);
          const source = target.replace(/\.js$/, '.ts');
          return relative(root, existsSync(source) ? source : target);
        });
        graph.set(relative(root, path), [...new Set(targets)]);
      }
    }
  };
  for (const f of folders) if (existsSync(join(root, f))) walk(join(root, f));
  return graph;
}

/** Every import circle of `graph`: its files (a strongly connected component of two or more, or a file importing itself), each as one cycle through them. */
function circles(graph: Map<string, string[]>): string[] {
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  // Each as its shortest cycle from its first file (by name), so that a report reads as imports.
  return found.map((component) => {
    const inside = new Set(component);
    const start = component[0];
    const before = new Map<string, string>();
    const queue = [start];
    for (let i = 0; i < queue.length && !before.has(start); i++) {
      for (const w of graph.get(queue[i]) ?? []) {
        if (!inside.has(w) || before.has(w)) continue;
        before.set(w, queue[i]);
        queue.push(w);
      }
    }
    const path = [start];
    for (let v = before.get(start)!; v !== start; v = before.get(v)!) path.unshift(v);
    return [start, ...path].join(' → ');
  }).sort();
}

// STYLE.md "Where Pier stands": no import cycles. A circle closed through `import type` counts: it
// still ties the two files' designs together, and a type-only import becomes a value import with
// one edit.
test('no import circle in the product, `import type` included', (t) => {
  t.deepEqual(circles(importGraph(ROOT, PRODUCT)), [], 'import circles');
});

test('the circle check sees a circle closed by `import type`, a re-export or a JSDoc import, and nothing in a chain', (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pier-circles-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const files: Record<string, string> = {
    'p/a.ts': "import type { B } from './b.js';\nexport interface A { b: B }\n",
    'p/b.ts': "import {\n  a,\n} from './c.js';\nexport type B = typeof a;\n",
    'p/c.ts': "export * from './a.js';\nexport const a = 1;\n",
    'p/d.ts': "import { a } from './c.js';\nexport const d = a;\n",
    'q/x.js': "/** @typedef {import('./y.js').Y} X */\nexport {};\n",
    'q/y.js': "import './x.js';\nexport {};\n",
    'q/z.ts': "import { d } from '../p/d.js';\nexport const z = d;\n",
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  t.deepEqual(circles(importGraph(root, ['p', 'q'])), ['p/a.ts → p/b.ts → p/c.ts → p/a.ts', 'q/x.js → q/y.js → q/x.js']);
});

/**
 * The edge's folders (docs/architecture.md) meet only through edge/identity/ (who a request comes
 * from) and edge/http/ (HTTP itself), which import no other edge folder; edge/routes.ts and
 * edge/server.ts, which put the listeners together, import any.
 */
test("the edge's folders import edge/identity/, edge/http/ and their own files, never another's", (t) => {
  const graph = importGraph(ROOT, ['edge']);
  const folderOf = (file: string) => (file.split('/').length > 2 ? file.split('/')[1] : null);
  const sideways: string[] = [];
  for (const [from, targets] of graph) {
    const own = folderOf(from);
    if (own === null) continue;
    for (const to of targets) {
      const theirs = to.startsWith('edge/') ? folderOf(to) : null;
      if (theirs === null || theirs === own) continue;
      const shared = theirs === 'identity' || theirs === 'http';
      if (!shared || own === 'identity' || own === 'http') sideways.push(`${from} → ${to}`);
    }
  }
  t.deepEqual(sideways.sort(), []);
});

/** Every line of the TypeScript sources under `folders` that `pattern` finds, as `file:line: text`. */
function linesMatching(folders: string[], pattern: RegExp, allowed: (file: string) => boolean = () => false): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith('.ts') && !allowed(relative(ROOT, path))) {
        readFileSync(path, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (pattern.test(line)) out.push(`${relative(ROOT, path)}:${i + 1}: ${line.trim()}`);
          });
      }
    }
  };
  for (const folder of folders) walk(join(ROOT, folder));
  return out;
}

/** Pier's own processes (the SDK speaks the platform's HTTP protocol, which names some outcomes by their text alone). */
const PROCESSES = ['actors', 'bus', 'lib', 'edge', 'cli'];

// ARCHITECTURE.md "Errors are values with codes": code decides on codes and sub-codes, never on a message's text.
test('no decision on an error message\'s text: no regex tested on it, no comparison with it', (t) => {
  t.deepEqual(linesMatching(PROCESSES, /\/[^/\n]+\/[gimsuy]*\.test\([^)\n]*message/), []);
  t.deepEqual(linesMatching(PROCESSES, /(?<!typeof\s+[\w.()]+)\.message\s*[!=]==|\.message\)?\.(includes|startsWith|endsWith|match)\(/), []);
});

// "Every message and record says its version": a stored record is read through lib/state/record-format.ts,
// which checks its format; bytes of the bus are decoded in bus/ alone.
test('no raw msgpack decode outside bus/ and lib/state/record-format.ts', (t) => {
  const allowed = (file: string) => file.startsWith('bus/') || file === 'lib/state/record-format.ts';
  t.deepEqual(linesMatching(PROCESSES, /(^|[^.\w])decode\s*[<(]|\bdecode\b[^;]*from '[^']*codec\.js'/, allowed), []);
});

/**
 * What `file` imports when it loads, transitively: relative imports as source paths, packages by
 * name; not `import type` (erased), nor `import('…')` (loaded when called).
 */
function loadedWith(file: string): Set<string> {
  const seen = new Set<string>();
  const visit = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    if (!path.endsWith('.ts')) return;
    const text = readFileSync(join(ROOT, path), 'utf8');
    for (const m of text.matchAll(/^\s*(?:import(?!\s+type\b)[^'"]*?\bfrom\s*|import\s*|export(?!\s+type\b)[^'"]*?\bfrom\s*)['"]([^'"]+)['"]/gm)) {
      const spec = m[1];
      if (!spec.startsWith('.')) visit(spec.startsWith('node:') ? spec : spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/'));
      else visit(relative(ROOT, resolve(dirname(join(ROOT, path)), spec)).replace(/\.js$/, '.ts'));
    }
  };
  visit(file);
  return seen;
}

// Issue #57: a process loads the code of the roles it runs, and no other (cli/roles.ts); an admin
// command loads no process at all. What `pier` loads before it knows its roles holds no actor's
// implementation (only declarations), no listener, neither uWebSockets.js nor LMDB, and no
// OpenTelemetry (only a process that exports spans loads it).
test('a process loads only its own roles\' code: the start path imports no actor implementation, listener, uWS, LMDB or OpenTelemetry', (t) => {
  const heavy = (m: string) => (m.startsWith('actors/') && !m.endsWith('/declaration.ts')) || m === 'edge/server.ts' || m === 'uWebSockets.js' || m === 'lmdb' || m.startsWith('@opentelemetry/');
  for (const entry of ['cli/main.ts', 'cli/start.ts']) t.deepEqual([...loadedWith(entry)].filter(heavy), [], entry);
  // The check sees what it must: an actor's implementation loads its store.
  t.true([...loadedWith('actors/vault/index.ts')].some(heavy));
  t.true(loadedWith('cli/start.ts').has('actors/vault/declaration.ts'));
  // An admin command loads no role's declaration either (`pier bus init` alone reads them).
  t.false([...loadedWith('cli/main.ts')].some((m) => m.startsWith('actors/')), 'cli/main.ts loads declarations');
});
