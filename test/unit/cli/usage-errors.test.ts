import test from 'ava';
import { parseArgs } from 'node:util';
import { OPTIONS, parseArgsMessage } from '../../../cli/flags.js';
import { closestFlag, commandGroups, groupHelp } from '../../../cli/help.js';

/** What the CLI says for `args`, parsed as main.ts parses them. */
const said = (args: string[]) => {
  try {
    parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
    return null;
  } catch (err) {
    return parseArgsMessage(err as Error & { code?: string });
  }
};

test('a mistyped flag is named, with the flag meant when it is a near miss, and no stray quote', (t) => {
  t.is(said(['user', 'list', '--jsn']), 'unknown flag --jsn (did you mean --json?); see pier help COMMAND for a command\'s flags');
  t.is(said(['vault', 'list', '--workspce', 'x']), 'unknown flag --workspce (did you mean --workspace?); see pier help COMMAND for a command\'s flags');
  t.is(said(['user', 'list', '--xyzzy']), 'unknown flag --xyzzy; see pier help COMMAND for a command\'s flags', 'no guess that far away');
  t.is(said(['user', 'list', '--user']), '--user needs a value (--user VALUE)');
  t.is(said(['status', '--json=3']), '--json takes no value');
  t.is(said(['user', 'list', '--json']), null);
});

test('closestFlag: at most two edits, and fewer than half the word', (t) => {
  t.is(closestFlag('purg', ['purge', 'user']), 'purge');
  t.is(closestFlag('us', ['user']), null, 'two letters of four is a guess');
  t.is(closestFlag('', ['user']), null);
});

test('every group of commands has help listing each of its commands with what it does', (t) => {
  t.deepEqual(commandGroups().sort(), ['app', 'bus', 'conn', 'metrics', 'provider', 'state', 'upload', 'user', 'vault']);
  const user = groupHelp('user')!;
  for (const c of ['pier user add NAME', 'pier user token NAME', 'pier user revoke NAME', 'pier user list']) t.true(user.includes(c), c);
  t.regex(user, /Creates a user and prints its first auth token/);
  t.is(groupHelp('nothing'), null);
  t.is(groupHelp('status'), null, 'a command is not a group');
});
