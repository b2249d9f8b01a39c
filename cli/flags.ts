import { closestFlag } from './help.js';

/** Every flag of every command (node:util parseArgs, strict: an unknown one is a usage error). */
export const OPTIONS = {
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
  workspace: { type: 'string' },
  env: { type: 'string' },
  'value-file': { type: 'string' },
  version: { type: 'string' },
  deleted: { type: 'boolean' },
  status: { type: 'boolean' },
  op: { type: 'string' },
  wait: { type: 'string' },
} as const;

/**
 * Node's parseArgs errors in the CLI's words: which flag, what is wrong, and the flag meant when it
 * is a near miss (its own text quotes oddly and suggests `--` for positionals, which is rarely meant).
 */
export function parseArgsMessage(err: Error & { code?: string }): string {
  const flagIn = (re: RegExp) => re.exec(err.message)?.[1] ?? '?';
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const typed = flagIn(/option '([^']+)'/i);
    const meant = closestFlag(typed.replace(/^-+/, ''), Object.keys(OPTIONS));
    return `unknown flag ${typed}${meant ? ` (did you mean --${meant}?)` : ''}; see pier help COMMAND for a command's flags`;
  }
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    // Node names the flag only in its text; what is wrong follows from the flag's own type here.
    const flag = flagIn(/option '(-[-\w]+)/i);
    const type = (OPTIONS as Record<string, { type: string }>)[flag.replace(/^-+/, '')]?.type;
    return type === 'boolean' ? `${flag} takes no value` : `${flag} needs a value (${flag} VALUE)`;
  }
  return `${err.message}; see pier help`;
}

