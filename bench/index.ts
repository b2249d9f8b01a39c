import { cpus } from 'node:os';
import { benchProvider } from './provider.js';
import { benchRegistry } from './registry.js';
import { benchVault } from './vault.js';
import { benchWs } from './ws.js';
import { benchUpload } from './upload.js';
import { pinLoad, pinning } from './pinning.js';

/** `npm run bench [-- NAME...]`: runs the named benchmarks (all by default) and prints one JSON document. */
const BENCHES: Record<string, () => Promise<Record<string, unknown>>> = {
  registry: benchRegistry,
  provider: benchProvider,
  vault: benchVault,
  ws: benchWs,
  upload: benchUpload,
};

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in BENCHES));
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown benchmark ${unknown.join(', ')} (have: ${Object.keys(BENCHES).join(', ')})\n`);
  process.exit(2);
}
// This process is the load generator: its core is the one the servers do not use.
pinLoad(process.pid);
const results: Record<string, unknown> = {};
for (const name of wanted.length > 0 ? wanted : Object.keys(BENCHES)) {
  // One benchmark that fails (a connection reset under load) is reported as such; the others still run.
  results[name] = await BENCHES[name]().catch((err: unknown) => {
    process.stderr.write(`bench ${name} failed: ${(err as Error).stack ?? String(err)}\n`);
    return { error: String((err as Error).message ?? err) };
  });
}
process.stdout.write(
  `${JSON.stringify({ machine: { cpus: cpus().length, node: process.version, note: 'shared 2-core VM: expect run-to-run noise of 10-20%', pinning: pinning() }, at: new Date().toISOString(), results }, null, 2)}\n`,
);
process.exit(0);
