// The admin API's answers and bodies of users, apps and providers: types only. edge/admin/api.ts
// declares the routes that answer them and re-exports them, so callers keep one import.

export interface UserRow {
  name: string;
  tokens: number;
  createdAt: string;
}

export interface IssuedToken {
  name: string;
  token: string;
}

export interface Revoked {
  name: string;
  revoked: number;
}

export interface InstallRequest {
  user: string;
  /** The manifest's YAML text. */
  manifest: string;
  /** Provider YAML texts the app registers. */
  providers?: string[];
  host?: string;
  credentials?: { OS_APP_KEY: string; OS_APP_SECRET: string };
  /** Its upload folder may nest with other apps' of the user: the operator vouches that they trust each other. */
  sharedDest?: boolean;
}

export interface Installed {
  app: string;
  user: string;
  /** The environment the app runs with. */
  env: { OS_SYSTEM_SERVER: string; OS_APP_KEY: string; OS_APP_SECRET: string };
  /** The user's folder for the app's uploads (host path); null when the app takes none or it could not be made now. */
  uploadDir: string | null;
  /** Why `uploadDir` is null although the app takes uploads. */
  uploadDirError?: string;
}

export interface GrantRow {
  dataType: string;
  group: string;
  version: string;
  ops: string[];
}

export interface AppRow {
  user: string;
  app: string;
  version: string;
  host: string;
  appKey: string;
  providers: string[];
  installedAt: string;
  sharedDest: boolean;
  /** What it may call; absent while this admin process's registry cache has not heard of it yet. */
  grants?: GrantRow[];
  /** Its manifest's `upload.dest` (the app's view), null when it takes no uploads; absent as `grants`. */
  uploadDest?: string | null;
  /** @deprecated 0.1 name of `uploadDest`, removed in 0.3. */
  upload_dest?: string | null;
}

export interface Uninstalled {
  app: string;
  user: string;
  purged: boolean;
}

export interface ProviderRow {
  name: string;
  user: string;
  app: string;
  namespace: string;
  version: 'v1' | 'v2';
  dataType: string;
  group: string;
  endpoint: string;
  deployment: string;
  description: string;
  opApis: Array<{ name: string; uri: string }>;
  state: 'active' | 'suspended';
  appliedAt: string;
}
