import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Issue #53, a newcomer's first hour: `pier vault list ...` copied from docs/vault.md answered
// `command not found`. A checkout has no `pier` on the PATH: the CLI is `npx pier` (or
// `node bin/pier.js`), as the README writes it. No shell block of README.md or docs/*.md may run a
// bare `pier`; prose may name a command as `pier user add` (that names it, it is not a line to run).

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Fenced blocks a reader runs in a shell: sh, bash, shell, console (any words after: `sh runnable`), or none named. */
const SHELL = /^(sh|bash|shell|console|zsh)?(\s.*)?$/;

/** Words a command may follow on its line: env assignments (`PIER_MASTER_KEY=... pier`), and these. */
const PREFIXES = new Set(['sudo', 'exec', 'env', 'time', 'nohup', 'then', 'do', 'else', '!']);

/** A line's commands: the text before each `|`, `;`, `&&`, `||`, `&`, `$(`, backquote or `(`, comments cut. */
function commandsOf(line: string): string[] {
  // A comment starts at a `#` at the start or after a blank (not `$#`, not in `a#b`); quotes are rare enough here.
  const code = line.replace(/(^|\s)#.*$/, '');
  return code.split(/\|\||&&|\$\(|[|;&`(]/);
}

/** The first word of a command, past env assignments and the PREFIXES. */
function programOf(command: string): string | undefined {
  const words = command.trim().split(/\s+/).filter(Boolean);
  let i = 0;
  while (i < words.length && (PREFIXES.has(words[i]) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]))) i++;
  return words[i];
}

/** Each line of a shell block of `markdown` that runs a bare `pier`, with its line number. */
export function barePierLines(markdown: string): Array<{ line: number; text: string }> {
  const lines = markdown.split('\n');
  const out: Array<{ line: number; text: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(.*)$/.exec(lines[i]);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    if (SHELL.test(open[1].trim())) {
      const block = lines.slice(i + 1, end);
      // A transcript (`$ command` then its output): only the prompted lines are commands.
      const transcript = block.some((l) => /^\s*\$ /.test(l));
      let continued = false;
      block.forEach((text, k) => {
        const wasContinued = continued;
        continued = /\\\s*$/.test(text);
        if (transcript && !/^\s*\$ /.test(text) && !wasContinued) return;
        const commands = commandsOf(text.replace(/^\s*\$ /, ''));
        // A continued line goes on with the command before: its start is not a command's.
        if (commands.slice(wasContinued ? 1 : 0).some((c) => programOf(c) === 'pier')) out.push({ line: i + 2 + k, text });
      });
    }
    i = end;
  }
  return out;
}

test('the detector: a bare pier anywhere a shell starts a command, and nothing else', (t) => {
  const found = (body: string, lang = 'sh') => barePierLines(`text\n\`\`\`${lang}\n${body}\n\`\`\`\n`).map((f) => f.text);
  t.deepEqual(found('pier vault list --user alice'), ['pier vault list --user alice']);
  t.deepEqual(found('  pier status'), ['  pier status']);
  t.deepEqual(found("printf 'x' | pier vault set --user a --workspace w n"), ["printf 'x' | pier vault set --user a --workspace w n"]);
  t.deepEqual(found('PIER_MASTER_KEY=... pier bus anchors --out DIR'), ['PIER_MASTER_KEY=... pier bus anchors --out DIR']);
  t.deepEqual(found('export T=$(pier user token alice --json)'), ['export T=$(pier user token alice --json)']);
  t.deepEqual(found('true && pier status; pier app list'), ['true && pier status; pier app list']);
  t.deepEqual(found('$ pier app install --json\n{"app":"chat"}'), ['$ pier app install --json']);
  t.deepEqual(found('pier status', 'sh runnable'), ['pier status']);
  t.deepEqual(found('pier status', 'bash'), ['pier status']);
  t.deepEqual(found('pier status', ''), ['pier status'], 'a block with no language is read as a shell');
  t.deepEqual(found('npx pier vault list --user alice'), []);
  t.deepEqual(found('node bin/pier.js status'), []);
  t.deepEqual(found('node "$ROOT/bin/pier.js" user add alice'), []);
  t.deepEqual(found('# the values `pier app install` printed'), [], 'a comment');
  t.deepEqual(found('npm start   # "pier ready" when up'), [], 'a comment after a command');
  t.deepEqual(found('$ npx pier app install\npier: upload.dest "/data" of app "files" encloses ... (409)'), [], "a transcript's output");
  t.deepEqual(found('npx pier app install --user alice \\\n    pier'), [], "a continued line's words are arguments");
  t.deepEqual(found('const pier = PierApp.fromEnv();\npier status', 'js'), [], 'not a shell block');
  t.deepEqual(found('pier:\n  image: pier', 'yaml'), []);
  t.deepEqual(barePierLines('Run `pier user add NAME` in prose.\n'), [], 'prose names commands');
});

test('no shell block of README.md or docs/*.md runs a bare `pier` (a checkout has none on the PATH: `npx pier`)', (t) => {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  t.true(files.includes('docs/vault.md'));
  const bare = files.flatMap((file) =>
    barePierLines(readFileSync(join(ROOT, file), 'utf8'))
      .map((f) => `${file}:${f.line}: ${f.text}`),
  );
  t.deepEqual(bare, [], 'write `npx pier ...` (or `node bin/pier.js ...`)');
});
