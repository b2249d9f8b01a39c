// `npm run example:chat`: starts Pier (own-pier.mjs), installs the example's two apps and prints the
// URL to open; `npm run example:chat -- --pier <admin URL> [--user NAME]` runs the example on a Pier
// already running instead (on-pier.mjs: a cluster, another terminal's npm start).
import { parseArgs } from 'node:util';

const { values: flags } = parseArgs({ options: { pier: { type: 'string' }, user: { type: 'string', default: 'alice' } }, strict: true });
if (flags.pier !== undefined) {
  const { runOnPier } = await import('./on-pier.mjs');
  await runOnPier({ adminUrl: flags.pier.replace(/\/$/, ''), user: flags.user }).catch((err) => {
    process.stderr.write(`example: ${err.message}\n`);
    process.exit(1);
  });
} else {
  await import('./own-pier.mjs');
}
