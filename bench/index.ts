import { cpus } from 'node:os';
import { benchProvider } from './provider.js';
import { benchRegistry } from './registry.js';
import { benchVault } from './vault.js';
import { benchWs } from './ws.js';
import { benchUpload } from './upload.js';
import { benchC100k } from './c100k.js';
import { benchBus } from './bus.js';
import { pinLoad, pinning } from './pinning.js';
import type { Goal } from './goals.js';

/** `npm run bench [-- NAME...]`: runs the named benchmarks (all by default) and prints one JSON document. */
const BENCHES: Record<string, () => Promise<Record<string, unknown>>> = {
  bus: benchBus,
  registry: benchRegistry,
  provider: benchProvider,
  vault: benchVault,
  ws: benchWs,
  upload: benchUpload,
};

/** Run only when named (`npm run bench -- c100k`): minutes long, and it needs root for its file limits. */
const ON_REQUEST: Record<string, () => Promise<Record<string, unknown>>> = { c100k: benchC100k };

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in BENCHES) && !(w in ON_REQUEST));
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown benchmark ${unknown.join(', ')} (have: ${[...Object.keys(BENCHES), ...Object.keys(ON_REQUEST)].join(', ')})\n`);
  process.exit(2);
}
// This process is the load generator: its core is the one the servers do not use.
pinLoad(process.pid);
const results: Record<string, unknown> = {};
for (const name of wanted.length > 0 ? wanted : Object.keys(BENCHES)) {
  // One benchmark that fails (a connection reset under load) is reported as such; the others still run.
  results[name] = await (BENCHES[name] ?? ON_REQUEST[name]!)().catch((err: unknown) => {
    process.stderr.write(`bench ${name} failed: ${(err as Error).stack ?? String(err)}\n`);
    return { error: String((err as Error).message ?? err) };
  });
}
// Every goal of every benchmark in one list (issue #26): Pier, its floor, the ratio, met or missed.
const goals = Object.entries(results).flatMap(([bench, r]) => ((r as { goals?: Goal[] }).goals ?? []).map((g) => ({ bench, ...g })));
process.stdout.write(
  `${JSON.stringify({ machine: { cpus: cpus().length, node: process.version, note: 'shared 2-core VM: expect run-to-run noise of 10-20%', pinning: pinning() }, at: new Date().toISOString(), results, goals }, null, 2)}\n`,
);
process.exit(0);
