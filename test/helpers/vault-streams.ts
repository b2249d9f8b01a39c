import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { JetStreamManager } from 'nats';
import { decode } from '../../bus/codec.js';
import { vaultState } from '../../bus/subjects.js';
import { jsNoMessage } from '../../lib/state/jetstream.js';

/** The vault's buckets (data keys, secrets, kept versions, deleted secrets, value keys). */
export const VAULT_BUCKETS = [vaultState.keys, vaultState.secrets, vaultState.versions, vaultState.deleted, vaultState.valueKeys] as const;

/** One message still in a vault bucket's stream, as a holder of the vault's state login reads it. */
export interface VaultEntry {
  bucket: string;
  seq: number;
  /** The vault's key (scope, secret or version key, NULs and all). */
  key: string;
  /** A removal (a tombstone: no value in it). */
  removal: boolean;
  /** The sealed values and wrapped keys it carries: what the master key opens. */
  secretBytes: Buffer[];
}

/**
 * Every message of the vault's buckets, fetched one by one by sequence (no consumer, nothing
 * skipped: a message the server still has is read whatever the key's state), decoded as the vault
 * writes it (store-jetstream.ts: an intent `{e, v?, d?}` under the key in base64url).
 */
export async function vaultEntries(jsm: JetStreamManager): Promise<VaultEntry[]> {
  const out: VaultEntry[] = [];
  for (const bucket of VAULT_BUCKETS) {
    const stream = `KV_${bucket}`;
    const { state } = await jsm.streams.info(stream);
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      let m;
      try {
        m = await jsm.streams.getMessage(stream, { seq });
      } catch (err) {
        if (jsNoMessage(err)) continue; // erased or deleted
        throw err;
      }
      const key = Buffer.from(m.subject.slice(`$KV.${bucket}.`.length), 'base64url').toString('utf8');
      const intent = decode<{ d?: true; v?: { sealed?: Uint8Array; wrapped?: Uint8Array } }>(m.data);
      const secretBytes = [intent.v?.sealed, intent.v?.wrapped].filter((b): b is Uint8Array => b instanceof Uint8Array).map((b) => Buffer.from(b));
      out.push({ bucket, seq, key, removal: intent.d === true, secretBytes });
    }
  }
  return out;
}

/** Files under `dir` (a JetStream store directory) holding any of `needles`, read raw. */
export function filesHolding(dir: string, needles: readonly Buffer[]): string[] {
  const files = (readdirSync(dir, { recursive: true }) as string[]).map((f) => join(dir, f));
  return files.filter((f) => {
    let bytes: Buffer;
    try {
      if (!statSync(f).isFile()) return false;
      bytes = readFileSync(f);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false; // a block the server removed meanwhile
      throw err;
    }
    return needles.some((n) => bytes.includes(n));
  });
}
