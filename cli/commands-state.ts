import { adminTarget, exportState, importState } from './admin-client.js';
import { arg, command, type Command } from './command.js';

/** The registry and the vault, out to a file and back in. */
export const STATE_COMMANDS = {
  'state export': command({
    usage: 'pier state export FILE   (the registry and the vault, secrets sealed; no master key)',
    run: (inv) => exportState(adminTarget(inv.env), arg(inv, 0, 'FILE')),
    text: (d) => `exported ${d.records} record(s) to ${d.file}`,
  }),
  'state import': command({
    usage: 'pier state import FILE   (into an empty registry and vault, with the same PIER_MASTER_KEY)',
    run: (inv) => importState(adminTarget(inv.env), arg(inv, 0, 'FILE')),
    text: (d) => `imported ${d.imported} record(s)`,
  }),
} satisfies Record<string, Command>;
