import { ask } from '../../bus/verbs.js';
import { ErrorReasons, PierError } from '../../bus/errors.js';
import { APP_NAME, credentialsSchema, registry, upload, USER_NAME, USER_NAME_RULE, type ImportedCredentials, type ProviderState, type ProviderView } from '../../bus/subjects.js';
import { assertValid, compile } from '../../bus/validation.js';
import type { HttpRequestData } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import type { AppRow, ProviderRow } from './api.js';
import { pathName, type AdminDeps, type AnswerHandlers } from './answers.js';

/** The admin routes of users, apps and providers (docs/protocol.md "Admin API"): each one registry request. */
export type UserRouteName = 'userAdd' | 'userList' | 'userToken' | 'userRevoke' | 'appInstall' | 'appList' | 'appUninstall' | 'providerList' | 'providerSuspend' | 'providerResume';

const installSchema = compile({
  $$strict: true,
  user: { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } },
  manifest: { type: 'string', min: 1 },
  providers: { type: 'array', optional: true, items: 'string' },
  host: { type: 'string', optional: true, min: 1, max: 253 },
  credentials: { type: 'object', optional: true, strict: true, props: credentialsSchema },
  // `pier app install --shared-dest`: this app and the user's apps whose upload folders nest with it trust each other.
  sharedDest: { type: 'boolean', optional: true },
});

/**
 * The user's folder for the app's uploads, created by the upload role (the one that has the
 * storage) and named so the operator can mount it into the app. The install has happened
 * whatever this answers: with no upload role reachable the folder is created at the first upload,
 * and the answer says why it could not name it now.
 */
async function uploadDir(deps: AdminDeps, user: string, dest: string | null): Promise<{ dir: string | null; error?: string }> {
  if (dest === null) return { dir: null };
  try {
    return { dir: (await ask(deps.bus, upload.prepare, { user, dest })).dir };
  } catch (err) {
    return { dir: null, error: `the upload role did not create the folder: ${(err as Error).message}` };
  }
}

export function userAnswers(deps: AdminDeps): AnswerHandlers<UserRouteName> {
  const setState = (state: ProviderState) => async (req: HttpRequestData) => providerRow(await ask(deps.bus, registry.providerSetState, { name: req.params.name, state }));

  return {
    userAdd: async (req) => {
      const body = parseJsonBody(req);
      return ask(deps.bus, registry.userAdd, { name: body.name as string });
    },
    userList: async () => (await ask(deps.bus, registry.userList, {})).map((u) => ({ name: u.name, tokens: u.tokens, createdAt: u.createdAt })),
    userToken: async (req) => ask(deps.bus, registry.userToken, { name: pathName(req, 'name', USER_NAME, 'user') }),
    userRevoke: async (req) => ask(deps.bus, registry.userRevoke, { name: pathName(req, 'name', USER_NAME, 'user') }),

    appInstall: async (req) => {
      const body = parseJsonBody(req);
      assertValid(installSchema, body);
      const installed = await ask(deps.bus, registry.appInstall, {
        user: body.user as string,
        manifest: body.manifest as string,
        providers: (body.providers as string[] | undefined) ?? [],
        host: (body.host as string | undefined) ?? '127.0.0.1',
        ...(body.credentials === undefined ? {} : { credentials: body.credentials as ImportedCredentials }),
        ...(body.sharedDest === true ? { sharedDest: true } : {}),
      });
      const folder = await uploadDir(deps, installed.user, installed.uploadDest);
      return {
        app: installed.app,
        user: installed.user,
        env: { OS_SYSTEM_SERVER: deps.systemServer(), OS_APP_KEY: installed.appKey, OS_APP_SECRET: installed.appSecret },
        uploadDir: folder.dir,
        ...(folder.error === undefined ? {} : { uploadDirError: folder.error }),
      };
    },
    appList: async (req) => {
      const user = req.query.get('user') ?? undefined;
      if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: ${USER_NAME_RULE}`);
      // With what the registry's caches know of each app: its grants and its upload folder (the console's apps view).
      const apps = await ask(deps.bus, registry.appList, user === undefined ? {} : { user });
      return apps.map((a): AppRow => {
        const row: AppRow = { user: a.user, app: a.app, version: a.version, host: a.host, appKey: a.appKey, providers: a.providers, installedAt: a.installedAt, sharedDest: a.sharedDest };
        const view = deps.cache.app(a.user, a.app);
        if (!view) return row;
        const dest = view.upload?.dest ?? null;
        return { ...row, grants: view.grants.map((g) => ({ dataType: g.dataType, group: g.group, version: g.version, ops: g.ops })), uploadDest: dest, upload_dest: dest };
      });
    },
    appUninstall: async (req) => {
      const purge = req.query.get('purge');
      if (purge !== null && purge !== 'true' && purge !== 'false') throw new PierError('BAD_REQUEST', 'purge: must be true or false');
      const user = pathName(req, 'user', USER_NAME, 'user');
      const app = pathName(req, 'app', APP_NAME, 'app');
      return ask(deps.bus, registry.appUninstall, { user, app, purge: purge === 'true' }).catch((err: unknown) => {
        // Purging an app already uninstalled: its grants went with it, but its workspaces can still go.
        if (err instanceof PierError && err.is(ErrorReasons.APP_UNKNOWN) && purge === 'true') {
          throw new PierError('NOT_FOUND', `${err.message}: to delete the secrets a plain uninstall kept, run pier vault purge --user ${user} --workspace W for each of its workspaces`);
        }
        throw err;
      });
    },

    providerList: async () => (await ask(deps.bus, registry.providerList, {})).map(providerRow),
    providerSuspend: setState('suspended'),
    providerResume: setState('active'),
  };
}

function providerRow(p: ProviderView): ProviderRow {
  return {
    name: p.name,
    user: p.user,
    app: p.app,
    namespace: p.namespace,
    version: p.version,
    dataType: p.dataType,
    group: p.group,
    endpoint: p.endpoint,
    deployment: p.deployment,
    description: p.description,
    opApis: p.opApis.map((o) => ({ name: o.name, uri: o.uri })),
    state: p.state,
    appliedAt: p.appliedAt,
  };
}
