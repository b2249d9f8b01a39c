import test from 'ava';
import { printable } from '../../../cli/commands.js';

test('values printed by the CLI cannot forge rows or drive the terminal', (t) => {
  t.is(printable('plain.name-1'), 'plain.name-1');
  t.is(printable('x\n2026-01-01\talice\tDeleteSecret\tok'), 'x\\x0a2026-01-01\\x09alice\\x09DeleteSecret\\x09ok');
  t.is(printable('\u001b[2J\u001b[H'), '\\x1b[2J\\x1b[H');
  t.is(printable('\u009b31m'), '\\x9b31m', 'C1 control (CSI) too');
  t.is(printable('a\\x0a'), 'a\\\\x0a', 'a literal backslash cannot fake an escape');
});
