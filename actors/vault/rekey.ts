import { PierError } from '../../bus/errors.js';
import { OPERATOR_IN_AUDIT, type RekeyAnswer, type RekeyRequest, type ValueFormats } from '../../bus/subjects.js';
import { keyIdOf } from '../../lib/crypto/secret-box.js';
import type { VaultDeps } from './handler.js';
import { scopeOf, secretFormatOf, secretOfVersion, versionFormatOf, type VaultStore, type VaultWriter } from './store.js';

// `pier vault rekey` (docs/vault.md "Destroyed"): values written before every vault
// replica sealed under value keys are sealed anew under keys of their own, a batch per write, so a
// call cut short (a replica stopped, a timeout) leaves every batch before it done and the next call
// goes on from what is left. Each batch is audited per scope as `Rekey` by the operator.

/** Values sealed anew per write. */
const BATCH = 100;
/** Values sealed anew per call unless the request says otherwise. */
const DEFAULT_LIMIT = 10_000;

/** How many live secrets and kept versions are under value keys, and how many under their data keys. */
export function valueFormats(store: VaultStore): ValueFormats {
  const { secrets, versions } = store.everything();
  const count = (records: Array<{ value: { sealed: Uint8Array } }>) => {
    const valueKeys = records.filter((r) => keyIdOf(r.value.sealed) !== undefined).length;
    return { valueKeys, dataKeys: records.length - valueKeys };
  };
  return { secrets: count(secrets), versions: count(versions) };
}

/** Up to `limit` records still sealed with their data keys, live secrets first, skipping `skip` (ones found unreadable). */
function stillOld(store: VaultStore, limit: number, skip: ReadonlySet<string>): Array<{ kind: 'secret' | 'version'; key: string }> {
  const { secrets, versions } = store.everything();
  const out: Array<{ kind: 'secret' | 'version'; key: string }> = [];
  for (const [kind, records] of [['secret', secrets], ['version', versions]] as const) {
    for (const r of records) {
      if (out.length >= limit) return out;
      if (keyIdOf(r.value.sealed) === undefined && !skip.has(`${kind}:${r.key}`)) out.push({ kind, key: r.key });
    }
  }
  return out;
}

export async function rekey(deps: VaultDeps, req: RekeyRequest): Promise<RekeyAnswer> {
  const { store, values } = deps;
  await store.sync();
  const sealing = values.sealing();
  if (req.status) return { ...valueFormats(store), rekeyed: 0, unreadable: 0, sealingUnderValueKeys: sealing };
  if (!sealing) {
    throw new PierError('CONFLICT', 'a vault replica of an earlier release is running: values are sealed under value keys only once every vault replica speaks wire format 3; finish the upgrade, then rekey (docs/vault.md "Versions")');
  }
  const limit = req.limit ?? DEFAULT_LIMIT;
  const unreadable = new Set<string>();
  /** Secrets sealed anew: their earlier records (JetStream: the secrets bucket's history) are erased after. */
  const touched = new Set<string>();
  let rekeyed = 0;
  // Found once per call (a scan of every record), then sealed anew a batch per write, each record
  // read again inside its write (another write may have got there first).
  const pending = stillOld(store, limit, unreadable);
  for (let i = 0; i < pending.length; i += BATCH) {
    const batch = pending.slice(i, i + BATCH);
    rekeyed += await store.write((w) => {
      let n = 0;
      const scopes = new Set<string>();
      for (const { kind, key } of batch) {
        try {
          if (sealAnew(deps, w, kind, key)) {
            n++;
            scopes.add(scopeOf(key));
            touched.add(kind === 'secret' ? key : secretOfVersion(key));
          }
        } catch {
          unreadable.add(`${kind}:${key}`);
        }
      }
      for (const scope of scopes) {
        const [user, workspace, env] = scope.split('\u0000');
        deps.auditInWrite(w, { at: new Date(deps.now()).toISOString(), user, app: OPERATOR_IN_AUDIT, op: 'Rekey', workspace, env, name: null, outcome: 'ok' });
      }
      return n;
    });
  }
  await store.sync();
  // The values' earlier copies under their data keys leave the streams too (those younger than the
  // margin at the hourly sweep: docs/vault.md "Versions"); LMDB's freed pages keep them until reused.
  await store.scrub?.(deps.now() - deps.bounds.scrubAfterMs, [...touched]).catch(() => undefined);
  return { ...valueFormats(store), rekeyed, unreadable: unreadable.size, sealingUnderValueKeys: true };
}

/** One record sealed anew under a value key of its own, as the write sees it; false when another write got there first. */
function sealAnew(deps: VaultDeps, w: VaultWriter, kind: 'secret' | 'version', key: string): boolean {
  const secret = kind === 'secret' ? key : secretOfVersion(key);
  const scope = scopeOf(secret);
  const record = kind === 'secret' ? w.secret(key) : w.version(key);
  if (!record || keyIdOf(record.sealed) !== undefined) return false;
  const plain = deps.values.open(scope, secret, record.sealed, w);
  const sealed = deps.values.seal(scope, secret, plain, w, true);
  if (kind === 'secret') w.putSecret(key, { ...w.secret(key)!, ...secretFormatOf(sealed), sealed });
  else w.putVersion(key, { ...w.version(key)!, ...versionFormatOf(sealed), sealed });
  return true;
}
