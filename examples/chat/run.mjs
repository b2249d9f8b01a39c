// `npm run example:chat`: starts Pier (own-pier.mjs), installs the example's two apps and prints the
// URL to open; `npm run example:chat -- --pier <admin URL> [--user NAME]` runs the example on a Pier
// already running instead (on-pier.mjs: a cluster, another terminal's npm start).
import { parseArgs } from 'node:util';

// `kill <pid of npm>` reaches the shell npm runs this script in, not this script: the shell dies and
// this script, its apps and its Pier would run on. So the parent's end is taken as a SIGTERM (the
// same stop as Ctrl-C's): a process whose parent died is handed to init, and its ppid changes.
const parent = process.ppid;
const orphaned = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(orphaned);
  process.kill(process.pid, 'SIGTERM');
}, 250).unref();

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
