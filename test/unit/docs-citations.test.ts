import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Comments and messages cite the doc section that holds the rule (issue 39): the file and the
// heading (or a bold lead-in, `**Name.**`) must exist, so a renamed section fails here, not in a
// reader's hands. The contract the team works from is not in the repository: nothing cites it.

const root = fileURLToPath(new URL('../../..', import.meta.url));
const SOURCES = ['actors', 'bus', 'cli', 'edge', 'lib', 'chaos', 'bench', 'sdk/src', 'scripts', 'test', 'deploy', 'console', 'examples', 'bin', '.ci'];
const ROOT_FILES = ['README.md', 'docker-compose.yml', 'Dockerfile', 'CHANGELOG.md', 'package.json'];
const EXTENSIONS = /\.(ts|js|mjs|cjs|yml|yaml|conf|sh|md|json|html|cfg)$|^run$|^Dockerfile$/;

function* walk(dir: string): Generator<string> {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.') && name !== '.ci') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path);
    else if (EXTENSIONS.test(name)) yield path;
  }
}

const files = [...SOURCES.flatMap((d) => [...walk(join(root, d))]), ...ROOT_FILES.map((f) => join(root, f)).filter((f) => existsSync(f))];

/** A doc's sections: its headings, and the bold lead-ins of its paragraphs and list items. */
function sectionsOf(doc: string): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync(doc, 'utf8').split('\n')) {
    const heading = /^#{1,6}\s+(.+?)\s*$/.exec(line);
    if (heading) out.add(heading[1]);
    const lead = /^\s*(?:[-*]\s+)?\*\*([^*]+?)\.?\*\*/.exec(line);
    if (lead) out.add(lead[1]);
  }
  return out;
}

// `docs/<file>.md`, optionally followed by a quoted section; a quote may wrap across comment lines.
const CITATION = /docs\/([a-z0-9-]+\.md)(?:,?\s*(?:section\s+)?"([^"]{1,200})")?/g;
const unwrap = (text: string) => text.replace(/\s*\n\s*(?:\*|#|\/\/)?\s*/g, ' ').trim();

test('every doc file and section the code cites exists', (t) => {
  const sections = new Map<string, Set<string> | null>();
  const broken: string[] = [];
  let cited = 0;
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(CITATION)) {
      cited++;
      const doc = join(root, 'docs', m[1]);
      if (!sections.has(doc)) sections.set(doc, existsSync(doc) ? sectionsOf(doc) : null);
      const known = sections.get(doc);
      const where = `${file.slice(root.length)}: docs/${m[1]}${m[2] ? ` "${unwrap(m[2])}"` : ''}`;
      if (known === null) broken.push(`${where} (no such file)`);
      else if (m[2] && !known!.has(unwrap(m[2]))) broken.push(`${where} (no such section)`);
    }
  }
  t.true(cited > 100, `citations found: ${cited}`);
  t.deepEqual(broken, []);
});

test('nothing cites the team\'s contract, which is not in the repository', (t) => {
  // Built from parts, so that this file does not cite it by naming it.
  const name = ['CONT', 'RACT'].join('');
  const contract = new RegExp(`${name}\\.md|${name} section`);
  const citing = files.filter((f) => contract.test(readFileSync(f, 'utf8'))).map((f) => f.slice(root.length));
  t.deepEqual(citing, [], 'cite the docs/ section instead');
});
