import { parseArgs } from 'node:util';
import { PierError } from '../bus/errors.js';
import { ConfigError, loadConfig } from '../lib/config.js';
import { startProcess } from './start.js';
import { logDestinationApartFromNativeOutput } from '../lib/log.js';
import { CliError } from './admin-client.js';
import { COMMANDS } from './commands.js';

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  user: { type: 'string' },
  manifest: { type: 'string' },
  provider: { type: 'string', multiple: true },
  host: { type: 'string' },
  credentials: { type: 'string' },
  limit: { type: 'string' },
  app: { type: 'string' },
  purge: { type: 'boolean' },
  'shared-dest': { type: 'boolean' },
  roles: { type: 'string' },
  'data-dir': { type: 'string' },
  out: { type: 'string' },
  identity: { type: 'string', multiple: true },
  force: { type: 'boolean' },
} as const;

function usage(): string {
  return ['usage:', '  pier start [--roles edge,registry,...] [--data-dir DIR] [--app USER/APP (sidecar)]', ...Object.values(COMMANDS).map((c) => `  ${c.usage} [--json]`)].join('\n');
}

async function runStart(values: Record<string, unknown>): Promise<void> {
  const config = loadConfig(process.env, { roles: values.roles as string | undefined, 'data-dir': values['data-dir'] as string | undefined, app: values.app as string | undefined });
  const proc = await startProcess(config, { logDestination: logDestinationApartFromNativeOutput() });
  let stopping = false;
  // The first signal stops cleanly within PIER_STOP_TIMEOUT_MS (what it waits for is logged); a
  // second one stops at once. Exit codes: 0 after SIGTERM, 130 after SIGINT, 1 when forced.
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`pier: ${signal} again: stopping now, without waiting\n`);
      process.exit(1);
    }
    stopping = true;
    process.stderr.write(`pier: ${signal}: stopping (within ${config.stopTimeoutMs} ms; ${signal} again to stop at once)\n`);
    void proc.stop().then(() => process.exit(signal === 'SIGINT' ? 130 : 0));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    process.stderr.write(`pier: ${(err as Error).message}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    process.stdout.write(`${usage()}\n`);
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  try {
    if (positionals[0] === 'start') {
      await runStart(values);
      return -1; // keeps running
    }
    const two = `${positionals[0]} ${positionals[1] ?? ''}`;
    const [name, rest] = COMMANDS[two] ? [two, positionals.slice(2)] : [positionals[0], positionals.slice(1)];
    const command = COMMANDS[name];
    if (!command) throw new CliError(`unknown command "${positionals.join(' ')}"; see pier --help`);
    const data = await command.run({ positionals: rest, values: values as any, env: process.env });
    process.stdout.write(`${values.json || !command.text ? JSON.stringify(data, null, values.json ? 0 : 2) : command.text(data)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof CliError || err instanceof ConfigError || err instanceof PierError) {
      process.stderr.write(`pier: ${err.message}\n`);
      return 1;
    }
    const code = (err as { code?: string }).code;
    process.stderr.write(`pier: ${code ? `${code}: ` : ''}${(err as Error).message}\n`);
    return 1;
  }
}
