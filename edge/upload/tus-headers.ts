import { TUS_METADATA_MAX } from '../../bus/subjects.js';
import { tusRefusal } from './tus-errors.js';

/**
 * Parsing the tus 1.0 request headers (docs/upload.md "tus 1.0 (`/tus/`)"). Each refusal names its header;
 * nothing here trusts a size or a format the client sent.
 */

export const TUS_VERSION = '1.0.0';
export const TUS_EXTENSIONS = 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum';
export const TUS_CHECKSUMS = ['sha1', 'md5', 'sha256'] as const;
export type TusChecksumAlgorithm = (typeof TUS_CHECKSUMS)[number];
const DIGEST_BYTES: Record<TusChecksumAlgorithm, number> = { sha1: 20, md5: 16, sha256: 32 };

/** Keys an `Upload-Metadata` may carry at most. */
const METADATA_KEYS = 32;

/** A length or offset header: digits only, a safe integer; undefined when absent. */
export function byteCount(value: string | undefined, header: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,16}$/.test(value) || !Number.isSafeInteger(Number(value))) throw tusRefusal('NOT_A_COUNT', header);
  return Number(value);
}

const METADATA_KEY = /^[A-Za-z0-9_.~-]{1,64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * `Upload-Metadata`: comma-separated `key base64(value)` pairs, a key alone for an empty value.
 * Bounded in size and count; keys unique; values strict base64 of UTF-8 without NUL.
 */
export function parseMetadata(header: string | undefined): Record<string, string> {
  const meta: Record<string, string> = Object.create(null) as Record<string, string>;
  if (header === undefined || header.trim() === '') return meta;
  if (Buffer.byteLength(header) > TUS_METADATA_MAX) throw tusRefusal('METADATA_TOO_LONG', TUS_METADATA_MAX);
  const pairs = header.split(',');
  if (pairs.length > METADATA_KEYS) throw tusRefusal('METADATA_TOO_MANY', METADATA_KEYS);
  for (const pair of pairs) {
    const [key, value = '', ...rest] = pair.trim().split(' ');
    if (rest.length > 0 || key === undefined || !METADATA_KEY.test(key)) throw tusRefusal('METADATA_ENTRY');
    if (key in meta) throw tusRefusal('METADATA_TWICE', key);
    if (!BASE64.test(value)) throw tusRefusal('METADATA_NOT_BASE64', key);
    const text = Buffer.from(value, 'base64').toString('utf8');
    if (text.includes('\0') || text.includes('\uFFFD')) throw tusRefusal('METADATA_NOT_TEXT', key);
    meta[key] = text;
  }
  return meta;
}

/** `Upload-Checksum: <algorithm> <base64 digest>`: null when absent; 400 for an algorithm not offered. */
export function parseChecksum(header: string | undefined): { algorithm: TusChecksumAlgorithm; digest: Buffer } | null {
  if (header === undefined) return null;
  const [algorithm, value, ...rest] = header.trim().split(' ');
  if (!(TUS_CHECKSUMS as readonly string[]).includes(algorithm ?? '')) throw tusRefusal('CHECKSUM_ALGORITHM', TUS_CHECKSUMS);
  const alg = algorithm as TusChecksumAlgorithm;
  const digest = value !== undefined && rest.length === 0 && BASE64.test(value) ? Buffer.from(value, 'base64') : null;
  if (!digest || digest.byteLength !== DIGEST_BYTES[alg]) throw tusRefusal('CHECKSUM_FORM', alg, DIGEST_BYTES[alg]);
  return { algorithm: alg, digest };
}

/** A value of the metadata that says nothing: absent, empty, or what `String(null)` makes of an absent one. */
export function metaText(meta: Record<string, string>, ...keys: string[]): string | undefined {
  for (const k of keys) {
    const v = meta[k];
    if (v !== undefined && v !== '' && v !== 'null' && v !== 'undefined') return v;
  }
  return undefined;
}
