import { BUS_ROLES, type BusRole } from '../bus/permissions.js';
import { CliError } from './admin-client.js';
import { writeBusAnchors } from './bus-anchors.js';
import { busInitOut } from './bus-init-out.js';
import { command, type Command } from './command.js';

/** The bus's credentials and anchors, written to files (no admin API: run before anything starts). */
export const BUS_COMMANDS = {
  'bus init': command({
    usage: 'pier bus init [--out DIR (default ~/.pier/bus)] [--identity NAME=ROLE,ROLE]... [--force (a folder inside a git work tree)]',
    run: async (inv) => {
      const extra: Record<string, BusRole[]> = {};
      for (const spec of (inv.values.identity as string[] | undefined) ?? []) {
        const m = /^([^=]+)=(.+)$/.exec(spec);
        if (!m) throw new CliError(`--identity: "${spec}" must be NAME=ROLE,ROLE`, undefined, 'usage');
        const roles = m[2].split(',').map((r) => r.trim());
        const unknown = roles.find((r) => !(BUS_ROLES as readonly string[]).includes(r));
        if (unknown) throw new CliError(`--identity: unknown role "${unknown}" (roles: ${BUS_ROLES.join(', ')})`, undefined, 'usage');
        extra[m[1]] = roles as BusRole[];
      }
      try {
        // The roles' rights (every declaration and its exchanges) are loaded by this command alone.
        const { planIdentities, writeBusInit } = await import('./bus-init.js');
        return writeBusInit(busInitOut(inv.values.out as string | undefined, inv.values.force === true, inv.env), planIdentities(extra));
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`bus init: ${(err as Error).message}`);
      }
    },
    text: (d) =>
      [
        `nats-server accounts: ${d.server} (include it from nats-server.conf): PIER for the services, PIER_STATE_<ROLE> for each role's JetStream state`,
        ...d.identities.map((i) => `  ${i.user.padEnd(18)} ${i.creds}  (${i.roles.join(',')})`),
        'Start each Pier process with NATS_CREDS=<its .nats.env file> (it carries the role\'s state logins too).',
      ].join('\n'),
  }),
  'bus anchors': command({
    usage: 'pier bus anchors [--out DIR (default ~/.pier/bus)] [--force (a folder inside a git work tree)]   (reads PIER_MASTER_KEY, or master.key in PIER_DATA_DIR)',
    run: async (inv) => {
      try {
        return writeBusAnchors(busInitOut(inv.values.out as string | undefined, inv.values.force === true, inv.env), inv.env);
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`bus anchors: ${(err as Error).message}`);
      }
    },
    text: (d) =>
      [
        `bus anchors: ${d.anchors} (public: PIER_BUS_ANCHORS=<it> for every process without the master key)`,
        `callback key: ${d.callbackKey} (secret, 0600: PIER_CALLBACK_KEY=<it> for callback replicas only)`,
        `admin key: ${d.adminKey} (secret, 0600: PIER_ADMIN_KEY=<it> for the admin process only)`,
        `history key: ${d.historyKey} (secret, 0600: PIER_HISTORY_KEY=<it> for edges: seals the gateway's history at rest)`,
        ...(d.masterKeys > 1 ? ['Both the current and the previous master key are pinned: write them again once the rotation is done.'] : []),
      ].join('\n'),
  }),
} satisfies Record<string, Command>;
