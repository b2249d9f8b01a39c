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
