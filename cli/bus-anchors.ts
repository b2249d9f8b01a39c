import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { anchorsFromMasterKeys, formatAnchors, formatHistoryKeys, formatSeeds, historySeed, roleSeed } from '../lib/crypto/bus-anchors.js';
import { ENV } from '../lib/config/config.js';
import { parseMasterKey } from '../lib/config/config-secrets.js';
import { CliError } from './admin-client.js';
import { replaceDurable } from '../lib/state/durable-files.js';

/**
 * `pier bus anchors`: the files a process without the master key trusts the bus with
 * (docs/security.md, "Keys with an anchor"): `anchors` (public: every process without the master
 * key), `callback.key` (secret: callback replicas only), `admin.key` (secret: the admin process only)
 * and `history.key` (secret: edges, to seal the gateway's history at rest). All derive from the master key, read
 * where Pier reads it (`PIER_MASTER_KEY`, else `<data dir>/master.key`), with the previous one
 * during a rotation (`PIER_MASTER_KEY_PREVIOUS`: both are pinned until the rotation is done).
 * Running it again writes the same files for the same keys.
 */
export function writeBusAnchors(dir: string, env: Record<string, string | undefined>): { dir: string; anchors: string; callbackKey: string; adminKey: string; historyKey: string; masterKeys: number } {
  const masters = masterKeys(env);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const anchors = join(dir, 'anchors');
  const callbackKey = join(dir, 'callback.key');
  const adminKey = join(dir, 'admin.key');
  const historyKey = join(dir, 'history.key');
  replace(anchors, formatAnchors(anchorsFromMasterKeys(masters)), 0o644);
  replace(callbackKey, formatSeeds(masters.map((m) => roleSeed(m, 'callback')), 'callback'), 0o600);
  replace(adminKey, formatSeeds(masters.map((m) => roleSeed(m, 'admin')), 'admin'), 0o600);
  replace(historyKey, formatHistoryKeys(masters.map(historySeed)), 0o600);
  return { dir, anchors, callbackKey, adminKey, historyKey, masterKeys: masters.length };
}

function masterKeys(env: Record<string, string | undefined>): Buffer[] {
  let current: Buffer;
  if (env[ENV.masterKey]) current = parseMasterKey(env[ENV.masterKey]!, ENV.masterKey);
  else {
    const file = join(resolve(env[ENV.dataDir] || './data'), 'master.key');
    if (!existsSync(file)) throw new CliError(`bus anchors: no master key: set ${ENV.masterKey} or ${ENV.dataDir} (the folder holding master.key)`);
    current = parseMasterKey(readFileSync(file, 'utf8').trim(), file);
  }
  const previous = env[ENV.previousMasterKey] ? [parseMasterKey(env[ENV.previousMasterKey]!, ENV.previousMasterKey)] : [];
  return [current, ...previous];
}

/**
 * Written beside, synced and renamed over, the folder synced: a process starting meanwhile reads the
 * old file or the new, never half of one, and a power cut keeps one of them (lib/state/durable-files.ts).
 */
function replace(path: string, text: string, mode: number): void {
  replaceDurable(path, text, mode);
  chmodSync(path, mode);
}
