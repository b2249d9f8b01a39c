import { ErrorReasons, PierError } from '../../bus/errors.js';
import type { AppCallbackKey, AppCredentials, AppSummary, ChangeEvent, ImportedCredentials, InstalledApp, IssuedToken, ProviderState, ProviderView, UserSummary } from '../../bus/subjects.js';
import type { Keyring } from '../../lib/crypto/keyring.js';
import { newAppKey, newAppSecret, newUserToken, safeEqual, sha256Hex } from '../../lib/crypto/tokens.js';
import { callbackKeyOf } from '../../lib/crypto/app-secrets.js';
import { destConflict } from './dest-nesting.js';
import { parseManifest } from './manifest.js';
import { parseProviderDocs } from './provider-doc.js';
import type { AppRecord, RegistryStore, Writer } from './store.js';
import { appId } from '../../bus/ids.js';

export interface RegistryDeps {
  store: RegistryStore;
  keyring: Keyring;
  now: () => Date;
  /** Hears every committed change, in commit order, to publish it. */
  publish: (event: ChangeEvent) => void;
}

/** Associated data of a sealed app secret: the secret only opens for the app it was made for. */
const secretContext = (appId: string) => `pier/app-secret/${appId}`;

async function commit<T>(deps: RegistryDeps, fn: (w: Writer) => T): Promise<T> {
  const { result, event } = await deps.store.write(fn);
  if (event) deps.publish(event);
  return result;
}

function requireUser(deps: RegistryDeps, name: string): void {
  if (!deps.store.getUser(name)) throw new PierError('NOT_FOUND', `user "${name}" not found`);
}

export function userAdd(deps: RegistryDeps, name: string): Promise<IssuedToken> {
  const token = newUserToken();
  return commit(deps, (w) => {
    if (deps.store.getUser(name)) throw new PierError('CONFLICT', `user "${name}" already exists`);
    w.putUser({ name, createdAt: deps.now().toISOString() });
    w.putToken({ digest: sha256Hex(token), user: name });
    return { name, token };
  });
}

export function userToken(deps: RegistryDeps, name: string): Promise<IssuedToken> {
  const token = newUserToken();
  return commit(deps, (w) => {
    requireUser(deps, name);
    w.putToken({ digest: sha256Hex(token), user: name });
    return { name, token };
  });
}

export function userRevoke(deps: RegistryDeps, name: string): Promise<{ name: string; revoked: number }> {
  return commit(deps, (w) => {
    requireUser(deps, name);
    const tokens = deps.store.listTokens(name);
    for (const t of tokens) w.deleteToken(t.digest);
    return { name, revoked: tokens.length };
  });
}

export function userList(deps: RegistryDeps): UserSummary[] {
  const counts = new Map<string, number>();
  for (const t of deps.store.listTokens()) counts.set(t.user, (counts.get(t.user) ?? 0) + 1);
  return deps.store.listUsers().map((u) => ({ name: u.name, createdAt: u.createdAt, tokens: counts.get(u.name) ?? 0 }));
}

function sameProviderTarget(a: ProviderView, b: { dataType: string; group: string; version: string }): boolean {
  return a.dataType === b.dataType && a.group === b.group && a.version === b.version;
}

export interface InstallRequest {
  user: string;
  manifest: string;
  providers: string[];
  host: string;
  credentials?: ImportedCredentials;
  /** The operator's word that this app and the user's apps whose upload folders nest with it trust each other. */
  sharedDest?: boolean;
}

/** bcrypt reads 72 bytes of `app_key + timestamp + app_secret`; timestamps have 10 digits. */
const BCRYPT_INPUT_BYTES = 72;

export async function appInstall(deps: RegistryDeps, req: InstallRequest): Promise<InstalledApp> {
  // Parse and validate everything before the transaction: bad input changes nothing.
  const manifest = parseManifest(req.manifest);
  const docs = parseProviderDocs(req.providers, req.user);
  const id = appId(req.user, manifest.name);
  const appKey = req.credentials?.OS_APP_KEY ?? newAppKey();
  const appSecret = req.credentials?.OS_APP_SECRET ?? newAppSecret();
  if (appKey.length + 10 + appSecret.length > BCRYPT_INPUT_BYTES) {
    throw new PierError('BAD_REQUEST', `credentials: OS_APP_KEY and OS_APP_SECRET together must be at most ${BCRYPT_INPUT_BYTES - 10} characters, so bcrypt covers the whole secret`);
  }
  const secretSealed = deps.keyring.seal(Buffer.from(appSecret), secretContext(id));
  const now = deps.now().toISOString();

  return commit(deps, (w) => {
    requireUser(deps, req.user);
    if (deps.store.getApp(id)) throw new PierError('CONFLICT', `app "${manifest.name}" is already installed for user "${req.user}"`);
    if (deps.store.appByKey(appKey)) throw new PierError('CONFLICT', 'credentials: OS_APP_KEY is already used by another app');
    // Inside the write, like "already installed": two concurrent installs cannot both pass it.
    if (manifest.upload && !req.sharedDest) refuseNestedDest(deps, req.user, manifest.name, manifest.upload.dest);
    const others = deps.store.listProviders();
    for (const doc of docs) {
      const owner = others.find((p) => p.name === doc.name);
      if (owner && (owner.user !== req.user || owner.app !== manifest.name)) {
        throw new PierError('CONFLICT', `provider "${doc.name}" belongs to app "${owner.app}" of user "${owner.user}"`);
      }
      const clash = others.find((p) => p.user === req.user && p.app !== manifest.name && p.state === 'active' && sameProviderTarget(p, doc));
      if (clash) {
        throw new PierError('CONFLICT', `provider "${clash.name}" of app "${clash.app}" already serves ${doc.dataType}/${doc.group}/${doc.version}`);
      }
    }
    for (const doc of docs) w.putProvider({ ...doc, user: req.user, app: manifest.name, state: 'active', appliedAt: now });
    const app: AppRecord = {
      id,
      user: req.user,
      name: manifest.name,
      version: manifest.version,
      host: req.host,
      appKey,
      secretDigest: sha256Hex(appSecret),
      secretSealed,
      grants: manifest.grants,
      websocket: manifest.websocket,
      upload: manifest.upload,
      providers: docs.map((d) => d.name),
      installedAt: now,
      ...(req.sharedDest ? { sharedDest: true } : {}),
    };
    w.putApp(app);
    return { app: manifest.name, user: req.user, appKey, appSecret, uploadDest: manifest.upload?.dest ?? null };
  });
}

/** 409 when `dest` nests with the upload folder of another app of `user` (see dest-nesting.ts). */
function refuseNestedDest(deps: RegistryDeps, user: string, name: string, dest: string): void {
  const others = deps.store.listApps(user).flatMap((a) => (a.upload ? [{ app: a.name, dest: a.upload.dest }] : []));
  const conflict = destConflict(name, dest, others);
  if (conflict) throw new PierError('CONFLICT', conflict.message, { data: { app: conflict.other?.app ?? null, dest: conflict.other?.dest ?? null } });
}

function summary(app: AppRecord): AppSummary {
  return { app: app.name, user: app.user, version: app.version, host: app.host, appKey: app.appKey, providers: app.providers, installedAt: app.installedAt, sharedDest: app.sharedDest === true };
}

export function appList(deps: RegistryDeps, user?: string): AppSummary[] {
  if (user !== undefined) requireUser(deps, user);
  return deps.store.listApps(user).map(summary);
}

export function appUninstall(deps: RegistryDeps, user: string, name: string, purge: boolean): Promise<{ app: string; user: string; purged: boolean }> {
  return commit(deps, (w) => {
    const app = deps.store.getApp(appId(user, name));
    if (!app) throw new PierError('NOT_FOUND', `app "${name}" is not installed for user "${user}"`, { reason: ErrorReasons.APP_UNKNOWN });
    // Its providers go with it: calls to them stop at once (404), and a reinstall registers them again.
    for (const providerName of app.providers) if (deps.store.getProvider(providerName)) w.deleteProvider(providerName);
    w.deleteApp(app, purge);
    return { app: name, user, purged: purge };
  });
}

export function appCredentials(deps: RegistryDeps, appKey: string): AppCredentials {
  const app = deps.store.appByKey(appKey);
  if (!app) throw new PierError('NOT_FOUND', 'unknown app key');
  const appSecret = deps.keyring.open(app.secretSealed, secretContext(app.id)).toString();
  return { user: app.user, app: app.name, appKey: app.appKey, appSecret };
}

/** The app's callback key (lib/crypto/app-secrets.ts): what the callback role signs with, never the secret. */
export function appCallbackKey(deps: RegistryDeps, appKey: string): AppCallbackKey {
  const { appSecret, ...app } = appCredentials(deps, appKey);
  return { ...app, callbackKey: callbackKeyOf(appSecret) };
}

export function appVerify(deps: RegistryDeps, appKey: string, secret: string): { app: string } {
  const app = deps.store.appByKey(appKey);
  // The digest is compared even for an unknown key, so timing does not tell which keys exist.
  const ok = safeEqual(sha256Hex(secret), app?.secretDigest ?? UNKNOWN_DIGEST);
  if (!app || !ok) throw new PierError('UNAUTHORIZED', 'X-App-Key and X-App-Secret are required and must match an installed app');
  return { app: app.id };
}
const UNKNOWN_DIGEST = sha256Hex('no app has this secret');

export function providerSetState(deps: RegistryDeps, name: string, state: ProviderState): Promise<ProviderView> {
  return commit(deps, (w) => {
    const p = deps.store.getProvider(name);
    if (!p) throw new PierError('NOT_FOUND', `provider "${name}" not found`);
    if (state === 'active' && !deps.store.getApp(appId(p.user, p.app))) {
      throw new PierError('CONFLICT', `provider "${name}" cannot be resumed: app "${p.app}" is not installed`);
    }
    const clash = deps.store.listProviders().find((o) => o.name !== name && o.user === p.user && o.state === 'active' && sameProviderTarget(o, p));
    if (state === 'active' && clash) throw new PierError('CONFLICT', `provider "${clash.name}" already serves ${p.dataType}/${p.group}/${p.version}`);
    const next = { ...p, state };
    if (p.state !== state) w.putProvider(next);
    return next;
  });
}

/** Re-seals every app secret not sealed under the current master key (a master-key rotation). */
export function appReseal(deps: RegistryDeps): Promise<{ resealed: number }> {
  return commit(deps, (w) => {
    let resealed = 0;
    for (const app of deps.store.listApps()) {
      if (!deps.keyring.isStale(app.secretSealed)) continue;
      const secret = deps.keyring.open(app.secretSealed, secretContext(app.id));
      w.putApp({ ...app, secretSealed: deps.keyring.seal(secret, secretContext(app.id)) });
      resealed++;
    }
    return { resealed };
  });
}
