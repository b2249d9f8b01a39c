import { adminCall, type CallInput } from '../../cli/admin-client.js';
import type { COMMANDS, JsonOf } from '../../cli/commands.js';
import type { AdminRoute, AnswerOf } from '../../edge/admin/api.js';
import { cli, type CliResult } from './pier.js';

// The admin tests compile against the types the server answers and the CLI prints
// (edge/admin/api.ts): a field renamed there fails these tests' build, not only their run.

export type CommandWords = keyof typeof COMMANDS;

/** `pier <words> ...args --json`, its JSON typed as the command's admin route answers it. */
export async function cliJson<W extends CommandWords>(words: W, args: string[], env: Record<string, string>): Promise<Omit<CliResult, 'json'> & { json: JsonOf<(typeof COMMANDS)[W]> }> {
  return cli([...words.split(' '), ...args, '--json'], env);
}

/** One admin API call as the CLI makes it, answered as the route declares. */
export function adminApi<R extends AdminRoute>(adminUrl: string, token: string, route: R, input: CallInput<R> = {}): Promise<AnswerOf<R>> {
  return adminCall({ url: adminUrl, token, urlSource: 'the test', tokenSource: 'the test' }, route, input);
}
