import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
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
const PRODUCT = ['actors', 'bus', 'lib', 'edge', 'cli'];

// ARCHITECTURE.md "Errors are values with codes": code decides on codes and sub-codes, never on a message's text.
test('no decision on an error message\'s text: no regex tested on it, no comparison with it', (t) => {
  t.deepEqual(linesMatching(PRODUCT, /\/[^/\n]+\/[gimsuy]*\.test\([^)\n]*message/), []);
  t.deepEqual(linesMatching(PRODUCT, /(?<!typeof\s+[\w.()]+)\.message\s*[!=]==|\.message\)?\.(includes|startsWith|endsWith|match)\(/), []);
});

// "Every message and record says its version": a stored record is read through lib/state/record-format.ts,
// which checks its format; bytes of the bus are decoded in bus/ alone.
test('no raw msgpack decode outside bus/ and lib/state/record-format.ts', (t) => {
  const allowed = (file: string) => file.startsWith('bus/') || file === 'lib/state/record-format.ts';
  t.deepEqual(linesMatching(PRODUCT, /(^|[^.\w])decode\s*[<(]|\bdecode\b[^;]*from '[^']*codec\.js'/, allowed), []);
});
