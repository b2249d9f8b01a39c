import { readFileSync } from 'node:fs';
import { adminCall, adminTarget, CliError, type CallInput } from './admin-client.js';
import type { AdminRoute } from '../edge/admin/api.js';

// What a command is, and the helpers its words are read with (commands.ts gathers the commands).

export interface Invocation {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  env: Record<string, string | undefined>;
}

export interface Command<D = unknown> {
  usage: string;
  run(inv: Invocation): Promise<D>;
  /** Human-readable rendering when `--json` is not given. */
  text?(data: D): string;
}

/** A command whose `text` reads what its `run` answers (typed by the admin route it calls); its `--json` prints that. */
export const command = <D>(c: Command<D>): Command<D> => c;

/** What a command prints with `--json`: the answer type of the admin route it calls (edge/admin/api.ts). */
export type JsonOf<C> = C extends Command<infer D> ? D : never;

/** A file an option names, read whole; unreadable, a CliError naming the option and why. */
export function readFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** Positional `index`, required: missing, a usage error naming it. */
export function arg(inv: Invocation, index: number, name: string): string {
  const v = inv.positionals[index];
  if (v === undefined) throw new CliError(`missing ${name}`, undefined, 'usage');
  return v;
}

/** The flags among `names` that were given, as a query. */
export function given<K extends string>(inv: Invocation, names: K[]): { [N in K]?: string } {
  const q: { [N in K]?: string } = {};
  for (const k of names) if (inv.values[k] !== undefined) q[k] = flag(inv, k);
  return q;
}

/** Flag `--name`, required and not empty: missing, a usage error naming it. */
export function flag(inv: Invocation, name: string): string {
  const v = inv.values[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`missing --${name}`, undefined, 'usage');
  return v;
}

/** An admin API call, to the admin API the environment names (cli/admin-client.ts). */
export const call = <R extends AdminRoute>(inv: Invocation, route: R, input: CallInput<R> = {}) => adminCall(adminTarget(inv.env), route, input);

/**
 * Control characters (newline, tab, ANSI escapes, C1) as visible `\xNN`: a value stored as an app
 * sent it can neither forge a row nor drive the operator's terminal. Backslashes are doubled so an
 * escape cannot be faked either.
 */
export const printable = (v: string) => v.replace(/[\\\u0000-\u001f\u007f-\u009f]/g, (c) => (c === '\\' ? '\\\\' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
/** Rows as tab-separated lines, every cell made printable. */
export const table = (rows: string[][]) => rows.map((r) => r.map(printable).join('\t')).join('\n');
