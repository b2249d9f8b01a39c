import { ADMIN_API as API, type InstallRequest } from '../edge/admin/api.js';
import { CliError } from './admin-client.js';
import { arg, call, command, flag, given, readFile, table, type Command } from './command.js';

/** Users, their apps and the providers those apps serve. */
export const APP_COMMANDS = {
  'user add': command({
    usage: 'pier user add NAME',
    run: (inv) => call(inv, API.userAdd, { body: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `user ${d.name} created\ntoken: ${d.token}`,
  }),
  'user token': command({
    usage: 'pier user token NAME',
    run: (inv) => call(inv, API.userToken, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `token for ${d.name}: ${d.token}`,
  }),
  'user revoke': command({
    usage: 'pier user revoke NAME',
    run: (inv) => call(inv, API.userRevoke, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `revoked ${d.revoked} token(s) of ${d.name}`,
  }),
  'user list': command({
    usage: 'pier user list',
    run: (inv) => call(inv, API.userList),
    text: (d) => table([['NAME', 'TOKENS', 'CREATED'], ...d.map((u) => [u.name, String(u.tokens), u.createdAt])]),
  }),
  'app install': command({
    usage: 'pier app install --user U --manifest FILE [--provider FILE]... [--host H] [--credentials FILE] [--shared-dest]',
    run: (inv) => {
      const providers = ((inv.values.provider as string[] | undefined) ?? []).map((p) => readFile(p, '--provider'));
      const body: InstallRequest = { user: flag(inv, 'user'), manifest: readFile(flag(inv, 'manifest'), '--manifest'), providers };
      if (inv.values.host !== undefined) body.host = flag(inv, 'host');
      // Lets its upload.dest nest with another app's of the user: the operator vouches that they trust each other.
      if (inv.values['shared-dest'] === true) body.sharedDest = true;
      // A JSON file {"OS_APP_KEY", "OS_APP_SECRET"}: an app moving in keeps its credentials.
      // A file, not flags, so the secret never shows in the process list.
      if (inv.values.credentials !== undefined) {
        try {
          // Checked by the admin API (400 naming the field).
          body.credentials = JSON.parse(readFile(flag(inv, 'credentials'), '--credentials'));
        } catch (err) {
          if (err instanceof CliError) throw err;
          throw new CliError('--credentials: the file is not valid JSON');
        }
      }
      return call(inv, API.appInstall, { body });
    },
    // The environment for the app's chart, its upload folder (or why none).
    text: (d) =>
      [
        `app ${d.app} installed for ${d.user}`,
        ...Object.entries(d.env).map(([k, v]) => `${k}=${v}`),
        ...(d.uploadDir ? [`uploadDir=${d.uploadDir}`] : []),
        ...(d.uploadDirError ? [`WARNING: no upload folder: ${d.uploadDirError}`] : []),
      ].join('\n'),
  }),
  'app list': command({
    usage: 'pier app list [--user U]',
    run: (inv) => call(inv, API.appList, { query: given(inv, ['user']) }),
    text: (d) => table([['USER', 'APP', 'VERSION', 'APP KEY', 'PROVIDERS'], ...d.map((a) => [a.user, a.app, a.version, a.appKey, a.providers.join(',')])]),
  }),
  'app uninstall': command({
    usage: 'pier app uninstall --user U APP [--purge]',
    run: (inv) => call(inv, API.appUninstall, { params: { user: flag(inv, 'user'), app: arg(inv, 0, 'APP') }, query: inv.values.purge ? { purge: 'true' } : {} }),
    text: (d) => `app ${d.app} uninstalled for ${d.user}${d.purged ? ' (purged)' : ''}`,
  }),
  'provider list': command({
    usage: 'pier provider list',
    run: (inv) => call(inv, API.providerList),
    text: (d) => table([['NAME', 'USER', 'APP', 'TARGET', 'ENDPOINT', 'STATE'], ...d.map((p) => [p.name, p.user, p.app, `${p.dataType}/${p.group}/${p.version}`, p.endpoint, p.state])]),
  }),
  'provider suspend': command({
    usage: 'pier provider suspend NAME',
    run: (inv) => call(inv, API.providerSuspend, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `provider ${d.name} is ${d.state}`,
  }),
  'provider resume': command({
    usage: 'pier provider resume NAME',
    run: (inv) => call(inv, API.providerResume, { params: { name: arg(inv, 0, 'NAME') } }),
    text: (d) => `provider ${d.name} is ${d.state}`,
  }),
} satisfies Record<string, Command>;
