import test from 'ava';
import { parseArgs } from 'node:util';
import { OPTIONS, parseArgsMessage } from '../../../cli/flags.js';
import { closestCommand, closestFlag, commandGroups, groupHelp } from '../../../cli/help.js';
import { main } from '../../../cli/main.js';

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

/** What `pier ...args` writes on stderr, and its exit code (a usage error is told before any request). */
async function stderrOf(args: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string) => ((stderr += chunk), true)) as typeof process.stderr.write;
  try {
    // Everything main does before its first request is synchronous: the error is written by now.
    const code = main(args);
    process.stderr.write = write;
    return { code: await code, stderr };
  } finally {
    process.stderr.write = write;
  }
}

test('a mistyped command is told the command meant (issue #53: `pier usr add`)', async (t) => {
  t.deepEqual(await stderrOf(['usr', 'add', 'bob']), { code: 2, stderr: 'pier: unknown command "usr add bob" (did you mean "user add"?); see pier help\n' });
  t.deepEqual(await stderrOf(['stauts']), { code: 2, stderr: 'pier: unknown command "stauts" (did you mean "status"?); see pier help\n' });
  t.deepEqual(await stderrOf(['user', 'ad', 'bob']), { code: 2, stderr: 'pier: "user ad bob" is not a command (did you mean "user add"?); user has: user add, user token, user revoke, user list\n' });
  t.deepEqual(await stderrOf(['help', 'usr', 'add']), { code: 2, stderr: 'pier: unknown command "usr add" (did you mean "user add"?); see pier help\n' });
  t.deepEqual(await stderrOf(['nothing']), { code: 2, stderr: 'pier: unknown command "nothing"; see pier help\n' }, 'no guess that far away');
  t.deepEqual(await stderrOf(['user', 'frobnicate']), { code: 2, stderr: 'pier: "user frobnicate" is not a command; user has: user add, user token, user revoke, user list\n' });
  t.deepEqual(await stderrOf(['usr', 'add', '--json']), { code: 2, stderr: '{"error":{"status":0,"code":"USAGE","message":"unknown command \\"usr add\\" (did you mean \\"user add\\"?); see pier help"}}\n' });
});

test('closestCommand: a command before its group, the nearer first, two edits at most, never what was typed', (t) => {
  t.is(closestCommand(['usr', 'add']), 'user add');
  t.is(closestCommand(['usr', 'lst']), 'user list', 'a command two edits away before its group one edit away');
  t.is(closestCommand(['usr']), 'user', 'a group alone');
  t.is(closestCommand(['usr', 'frobnicate']), 'user');
  t.is(closestCommand(['vault', 'lst', 'x']), 'vault list');
  t.is(closestCommand(['bus', 'anchor']), 'bus anchors');
  t.is(closestCommand(['strat']), 'start');
  t.is(closestCommand(['user', 'frobnicate']), null, 'the group is what was typed');
  t.is(closestCommand(['xyzzy']), null);
  t.is(closestCommand(['ap']), 'app');
  t.is(closestCommand(['q']), null, 'one letter is a guess');
});
