import type { Command } from './command.js';
import { APP_COMMANDS } from './commands-apps.js';
import { BUS_COMMANDS } from './commands-bus.js';
import { LIVE_COMMANDS, STATUS_COMMANDS } from './commands-processes.js';
import { STATE_COMMANDS } from './commands-state.js';
import { VAULT_AUDIT, VAULT_COMMANDS } from './commands-vault.js';

export { printable, type Command, type Invocation, type JsonOf } from './command.js';

/**
 * Admin commands, by their words. `pier start` is handled by main.ts. Gathered from one file per
 * group, in the order `pier help` lists them (cli/help.ts reads this object's order).
 */
export const COMMANDS = {
  ...APP_COMMANDS,
  ...VAULT_AUDIT,
  ...LIVE_COMMANDS,
  ...VAULT_COMMANDS,
  ...BUS_COMMANDS,
  ...STATE_COMMANDS,
  ...STATUS_COMMANDS,
} satisfies Record<string, Command>;

/** The commands by their words, for lookups by what was typed. */
export const COMMAND_TABLE: Readonly<Record<string, Command | undefined>> = COMMANDS;
