import test from 'ava';
import { spawnSync } from 'node:child_process';
import { ROOT } from '../../helpers/pier.js';

// Every path Pier, the README's steps and the example make inside the checkout by default holds
// state or secrets (admin.token, master.key, LMDB files, exports, logs): none is one `git add .` away
// from a commit.
const MADE_BY_DEFAULT = [
  'data/admin.token', // npm start
  'data/master.key',
  'data/example-chat/run-1/pier.log', // npm run example:chat
  'data-admin/admin.token', // the README's cluster block, one folder per role
  'data-registry/registry.mdb',
  'data-vault/master.key',
  'data-upload/files/alice/x',
  'data-callback/lock.mdb',
  'pier-admin.log',
  'state.ndjson', // pier state export
  'auth.conf',
  'edge.nats.env',
];

const ignored = (path: string) => spawnSync('git', ['check-ignore', '-q', '--no-index', path], { cwd: ROOT }).status === 0;

test('every path made inside the checkout by default is ignored by git', (t) => {
  t.deepEqual(MADE_BY_DEFAULT.filter((p) => !ignored(p)), []);
});

test('the sources are not: bus/, lib/, data-like names inside the source folders', (t) => {
  for (const path of ['bus/exchange.ts', 'lib/state/jetstream.ts', 'docs/protocol.md', 'test/fixtures/auth.conf.before']) t.false(ignored(path), path);
});
