import test from 'ava';
import { CliError } from '../../../cli/admin-client.js';
import { COMMANDS } from '../../../cli/commands.js';
import { commandHelp, globalHelp, HELPED } from '../../../cli/help.js';
import { describeFailure, EXIT } from '../../../cli/outcome.js';
import { ConfigError } from '../../../lib/config/config.js';

test('every command has its own help: usage, what it does, an example; unknown ones have none', (t) => {
  t.deepEqual([...HELPED].sort(), [...Object.keys(COMMANDS), 'start'].sort());
  for (const name of [...Object.keys(COMMANDS), 'start']) {
    const text = commandHelp(name)!;
    t.regex(text, /^usage: pier /, name);
    t.regex(text, /\nexample: (.*\| )?pier |\nexample: .*pier\.js start/, name);
    t.regex(text, /exit codes: 0 done/, name);
  }
  t.regex(commandHelp('app install')!, /--shared-dest +allow its upload\.dest/);
  t.regex(commandHelp('user list')!, /PIER_ADMIN_URL/);
  t.is(commandHelp('user frobnicate'), null);
  t.regex(globalHelp(), /pier help COMMAND/);
});

test('exit codes by class: usage, unreachable, auth, not found, conflict, the rest', (t) => {
  const exit = (e: unknown) => describeFailure(e).exit;
  t.is(exit(new CliError('missing --user', undefined, 'usage')), EXIT.usage);
  t.is(exit(new CliError('cannot reach', undefined, 'unreachable')), EXIT.unreachable);
  t.is(exit(new CliError('no vault replica (503)', 503)), EXIT.unreachable);
  t.is(exit(new CliError('no admin token', undefined, 'auth')), EXIT.auth);
  t.is(exit(new CliError('wrong token (401)', 401)), EXIT.auth);
  t.is(exit(new CliError('not found (404)', 404)), EXIT.notFound);
  t.is(exit(new CliError('exists (409)', 409)), EXIT.conflict);
  t.is(exit(new CliError('bad (400)', 400)), EXIT.failed);
  t.is(exit(new ConfigError('PIER_X: bad')), EXIT.failed);
  t.deepEqual(describeFailure(new CliError('exists (409)', 409)), { status: 409, code: 'CONFLICT', message: 'exists (409)', exit: EXIT.conflict });
});
