import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The operator console's files (docs/operations.md "Console"), served by the admin listener from this
 * installation only: Pier's own page and scripts (`console/`) and the libraries it is built on, read
 * from their npm packages — Preact and htm for the views (no build step, 5 KiB), uPlot for the
 * charts (50 KiB, canvas, made for live time series). A fixed list: no path from a request ever
 * reaches the file system. `console/tsconfig.json` type-checks the console's scripts (`npm run build`);
 * they are served as written.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const require = createRequire(import.meta.url);

/** A package's folder, wherever npm put it. */
function packageDir(name: string): string {
  try {
    return dirname(require.resolve(`${name}/package.json`));
  } catch {
    return join(ROOT, 'node_modules', name);
  }
}

export interface Asset {
  body: Buffer;
  type: string;
}

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
/** The console's own modules (console/*.js): served by name, flat, so their relative imports (`./hooks.js`) hold on disk and here alike. */
const CONSOLE_SCRIPTS = [
  'app.js',
  'api.js',
  'html.js',
  'format.js',
  'hooks.js',
  'components.js',
  'view-processes.js',
  'view-users.js',
  'view-apps.js',
  'view-providers.js',
  'view-connections.js',
  'view-uploads.js',
  'view-audit.js',
  'view-secrets.js',
  'view-charts.js',
];
const SOURCES: Record<string, [() => string, string]> = {
  ...Object.fromEntries(CONSOLE_SCRIPTS.map((name): [string, [() => string, string]] => [name, [() => join(ROOT, 'console', name), JS]])),
  'style.css': [() => join(ROOT, 'console', 'style.css'), CSS],
  'preact.js': [() => join(packageDir('preact'), 'dist', 'preact.module.js'), JS],
  'preact-hooks.js': [() => join(packageDir('preact'), 'hooks', 'dist', 'hooks.module.js'), JS],
  'htm.js': [() => join(packageDir('htm'), 'dist', 'htm.module.js'), JS],
  'uplot.js': [() => join(packageDir('uplot'), 'dist', 'uPlot.esm.js'), JS],
  'uplot.css': [() => join(packageDir('uplot'), 'dist', 'uPlot.min.css'), CSS],
};

/** The import map: bare names of the libraries to their files here (inline, allowed by its hash in the CSP). */
const IMPORT_MAP = JSON.stringify({ imports: { preact: './assets/preact.js', 'preact/hooks': './assets/preact-hooks.js', htm: './assets/htm.js', uplot: './assets/uplot.js' } });

export interface ConsoleFiles {
  index: Buffer;
  assets: Map<string, Asset>;
  /** Headers of every console answer: a strict CSP (scripts from here and the import map only), no framing, no sniffing. */
  headers: Record<string, string>;
}

/** Reads every file once (they are small); a missing one is a broken installation, said at start. */
export function loadConsoleFiles(): ConsoleFiles {
  // A module left out of the list would be a 404 in the browser, the whole console with it: said at start instead.
  const unlisted = readdirSync(join(ROOT, 'console')).filter((name) => name.endsWith('.js') && !CONSOLE_SCRIPTS.includes(name));
  if (unlisted.length > 0) throw new Error(`console/${unlisted.join(', console/')}: not served (edge/admin/console-assets.ts CONSOLE_SCRIPTS)`);
  const assets = new Map<string, Asset>();
  for (const [name, [path, type]] of Object.entries(SOURCES)) assets.set(name, { body: readFileSync(path()), type });
  const index = Buffer.from(readFileSync(join(ROOT, 'console', 'index.html'), 'utf8').replace('<!--IMPORT_MAP-->', `<script type="importmap">${IMPORT_MAP}</script>`));
  const mapHash = createHash('sha256').update(IMPORT_MAP).digest('base64');
  return {
    index,
    assets,
    headers: {
      'content-security-policy': `default-src 'self'; script-src 'self' 'sha256-${mapHash}'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'`,
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    },
  };
}
