import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Keyring } from '../../lib/crypto/keyring.js';
import { keyIdOf, open } from '../../lib/crypto/secret-box.js';

/**
 * What an attacker holding the master key and a raw copy of the vault's disk reads (docs/vault.md
 * "Versions", "Destroyed"): every byte of every file (LMDB's free pages, JetStream's blocks and raft
 * logs alike), every sealed box in it tried under every key the same bytes yield.
 *
 * Boxes are found as msgpack binary fields (bin 8/16/32: how the vault's records and JetStream
 * intents carry `sealed` and `wrapped`), and as the LMDB slot file's records (magic `PVK1`, id,
 * length, wrapped key). Keys: every data key any wrapped copy opens to under the master key (for
 * the scopes named), then every value key any wrapped copy opens to under those data keys (for the
 * key ids the boxes name). Values: every box opened under its key, for the secret paths named.
 */
export interface ShredScan {
  /** Plaintexts of `wanted` found, with the file each was read from and the box's format. */
  found: Array<{ value: string; file: string; format: 'data key' | 'value key'; keyId?: string }>;
  /** The ids of the value keys recovered (from a slot, a message, a freed page): a destroyed value's must not be among them. */
  valueKeyIds: string[];
  /** Boxes seen in all (a scan that saw none read nothing: the caller checks it saw the live values). */
  boxes: number;
  dataKeys: number;
  valueKeys: number;
}

/** Every regular file under `dirs` (recursively). */
export function filesUnder(...dirs: string[]): string[] {
  return dirs.flatMap((dir) => (readdirSync(dir, { recursive: true }) as string[]).map((f) => join(dir, f)).filter((f) => {
    try {
      return statSync(f).isFile();
    } catch {
      return false; // a file the server removed meanwhile
    }
  }));
}

/** msgpack bin fields of `bytes` at least `min` long. */
function binaries(bytes: Buffer, min: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length - 2; i++) {
    const tag = bytes[i];
    let length = -1;
    let at = 0;
    if (tag === 0xc4) [length, at] = [bytes[i + 1], i + 2];
    else if (tag === 0xc5 && i + 3 < bytes.length) [length, at] = [bytes.readUInt16BE(i + 1), i + 3];
    else if (tag === 0xc6 && i + 5 < bytes.length) [length, at] = [bytes.readUInt32BE(i + 1), i + 5];
    if (length < min || at + length > bytes.length) continue;
    out.push(bytes.subarray(at, at + length));
  }
  return out;
}

/** Wrapped keys in an LMDB slot file's records. */
function slotRecords(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = bytes.indexOf('PVK1'); i >= 0; i = bytes.indexOf('PVK1', i + 1)) {
    const length = bytes[i + 20];
    if (length > 0) out.push(bytes.subarray(i + 21, i + 21 + length));
  }
  return out;
}

const attempt = <T>(fn: () => T): T | undefined => {
  try {
    return fn();
  } catch {
    return undefined;
  }
};

export function shredScan(files: readonly string[], masterKeys: readonly Buffer[], scopes: readonly string[], secretPaths: readonly string[], wanted: readonly string[], keyIds: readonly string[] = []): ShredScan {
  const blobs: Array<{ file: string; blob: Buffer }> = [];
  for (const file of files) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      continue;
    }
    for (const blob of [...binaries(bytes, 29), ...slotRecords(bytes)]) blobs.push({ file, blob });
  }
  return shredScanBlobs(blobs, masterKeys, scopes, secretPaths, wanted, keyIds);
}

/** `shredScan` over blobs already cut out (`file` names where each came from): the messages a stream still holds, say. */
export function shredScanBlobs(blobs: ReadonlyArray<{ file: string; blob: Buffer }>, masterKeys: readonly Buffer[], scopes: readonly string[], secretPaths: readonly string[], wanted: readonly string[], keyIds: readonly string[] = []): ShredScan {
  const keyring = new Keyring(masterKeys[0], masterKeys[1]);
  // Data keys: any blob the master key opens as a scope's data key (8 bytes of key id, then a box of 32 bytes).
  const dataKeys = new Map<string, { scope: string; key: Buffer }>();
  for (const { blob } of blobs) {
    if (blob.length !== 8 + 29 + 32 || !keyring.knows(blob)) continue;
    for (const scope of scopes) {
      const key = attempt(() => keyring.open(blob, `pier/vault/data-key/${scope}`));
      if (key?.length === 32) dataKeys.set(key.toString('hex'), { scope, key });
    }
  }
  // Value keys: for every key id a box names, any blob a data key opens as that id's key.
  // (`keyIds`: ids to look for whether or not a box naming them survived: a destroyed value's.)
  const ids = new Set([...keyIds, ...blobs.flatMap(({ blob }) => keyIdOf(blob) ?? [])]);
  const valueKeys = new Map<string, Buffer>();
  const wrappedCandidates = blobs.filter(({ blob }) => blob.length === 61 && blob[0] === 1);
  for (const id of ids) {
    for (const { blob } of wrappedCandidates) {
      if (valueKeys.has(id)) break;
      for (const { scope, key } of dataKeys.values()) {
        const opened = attempt(() => open(key, blob, `pier/vault/value-key/${scope}/${id}`));
        if (opened?.length === 32) valueKeys.set(id, opened);
      }
    }
  }
  // Values: every box under every key it may be under, for every path named (only boxes of a
  // wanted value's size: one that seals anything else cannot open to a wanted value).
  const wantedSet = new Set(wanted);
  const sizes = new Set(wanted.flatMap((v) => [29 + Buffer.byteLength(v), 45 + Buffer.byteLength(v)]));
  const found: ShredScan['found'] = [];
  let boxes = 0;
  for (const { file, blob } of blobs) {
    if ((blob[0] !== 1 && blob[0] !== 2) || !sizes.has(blob.length)) continue;
    boxes++;
    const id = keyIdOf(blob);
    const keys = id === undefined ? [...dataKeys.values()].map((d) => d.key) : valueKeys.has(id) ? [valueKeys.get(id)!] : [];
    for (const key of keys) {
      for (const path of secretPaths) {
        const value = attempt(() => open(key, blob, `pier/vault/secret/${path}`).toString('utf8'));
        if (value !== undefined && wantedSet.has(value)) found.push({ value, file, format: id === undefined ? 'data key' : 'value key', ...(id === undefined ? {} : { keyId: id }) });
      }
    }
  }
  return { found, boxes, dataKeys: dataKeys.size, valueKeys: valueKeys.size, valueKeyIds: [...valueKeys.keys()] };
}
