import { parseArgs } from 'node:util';
import { loadConfig } from '../lib/config/config.js';
import { logDestinationApartFromNativeOutput } from '../lib/runtime/log.js';
import { CliError } from './admin-client.js';
import { COMMAND_TABLE, type Invocation } from './commands.js';
import { closestCommand, commandHelp, globalHelp, groupHelp, unknownCommand } from './help.js';
import { OPTIONS, parseArgsMessage } from './flags.js';
import { describeFailure, EXIT } from './outcome.js';

async function runStart(values: Record<string, unknown>): Promise<void> {
  const config = loadConfig(process.env, { roles: values.roles as string | undefined, 'data-dir': values['data-dir'] as string | undefined, app: values.app as string | undefined });
  // Only `pier start` loads the process (the bus, the roles): an admin command does without it.
  const { startProcess } = await import('./start.js');
  const proc = await startProcess(config, { logDestination: logDestinationApartFromNativeOutput() });
  let first: NodeJS.Signals | null = null;
  // The first signal stops cleanly within PIER_STOP_TIMEOUT_MS (what it waits for is logged); a
  // second one stops at once. Exit codes: 0 after SIGTERM, 130 after SIGINT, 1 when forced.
  const shutdown = (signal: NodeJS.Signals) => {
    if (first !== null) {
      process.stderr.write(`pier: ${signal === first ? `${signal} again` : `${signal} after ${first}`}: stopping now, without waiting\n`);
      process.exit(1);
    }
    first = signal;
    process.stderr.write(`pier: ${signal}: stopping (within ${config.stopTimeoutMs} ms; a second signal stops at once)\n`);
    void proc.stop().then(() => process.exit(signal === 'SIGINT' ? 130 : 0));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** The command a list of words names (`user add`, `status`), with the words after it. */
function commandOf(positionals: string[]): { name: string; rest: string[] } | null {
  const two = `${positionals[0]} ${positionals[1] ?? ''}`;
  if (COMMAND_TABLE[two]) return { name: two, rest: positionals.slice(2) };
  if (COMMAND_TABLE[positionals[0]] || positionals[0] === 'start') return { name: positionals[0], rest: positionals.slice(1) };
  return null;
}

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    return fail(new CliError(parseArgsMessage(err as Error & { code?: string }), undefined, 'usage'), argv.includes('--json'));
  }
  const { values, positionals } = parsed;
  const json = values.json === true;
  if (positionals.length === 0) {
    if (values.help) {
      process.stdout.write(`${globalHelp()}\n`);
      return EXIT.ok;
    }
    if (json) return fail(new CliError('no command; see pier help', undefined, 'usage'), true);
    process.stdout.write(`${globalHelp()}\n`);
    return EXIT.usage;
  }
  if (positionals[0] === 'help' || values.help) {
    const words = positionals[0] === 'help' ? positionals.slice(1) : positionals;
    if (words.length === 0) {
      process.stdout.write(`${globalHelp()}\n`);
      return EXIT.ok;
    }
    const found = commandOf(words);
    const text = found ? commandHelp(found.name) : words.length === 1 ? groupHelp(words[0]) : null;
    if (!text) return fail(new CliError(unknownCommand(words), undefined, 'usage'), json);
    process.stdout.write(`${text}\n`);
    return EXIT.ok;
  }
  try {
    if (positionals[0] === 'start') {
      await runStart(values);
      return -1; // keeps running
    }
    const found = commandOf(positionals);
    const command = found && COMMAND_TABLE[found.name];
    if (!found || !command) {
      // `pier user` alone: the group's commands, as a usage error (nothing was done).
      const group = groupHelp(positionals[0]);
      if (group && !json && positionals.length === 1) {
        process.stderr.write(`${group}\n`);
        return EXIT.usage;
      }
      const members = group ? Object.keys(COMMAND_TABLE).filter((n) => n.startsWith(`${positionals[0]} `)) : [];
      const meant = closestCommand(positionals);
      throw new CliError(members.length > 0 ? `"${positionals.join(' ')}" is not a command${meant ? ` (did you mean "${meant}"?)` : ''}; ${positionals[0]} has: ${members.join(', ')}` : unknownCommand(positionals), undefined, 'usage');
    }
    const data = await command.run({ positionals: found.rest, values: values as Invocation['values'], env: process.env });
    process.stdout.write(`${json || !command.text ? JSON.stringify(data, null, json ? 0 : 2) : command.text(data)}\n`);
    return EXIT.ok;
  } catch (err) {
    return fail(err, json);
  }
}

/** One line on stderr (or one JSON document with --json); the exit code says the class. */
function fail(err: unknown, json: boolean): number {
  const f = describeFailure(err);
  // One line, whatever the message carries (a file name with a newline in it, say).
  const message = f.message.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  process.stderr.write(json ? `${JSON.stringify({ error: { status: f.status, code: f.code, message } })}\n` : `pier: ${message}\n`);
  return f.exit;
}
