import { PierError } from '../../bus/errors.js';
import { STATE_KINDS, type StateRecord } from '../../bus/subjects.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/json-depth.js';

/**
 * The `pier state export` file: one JSON record per line (NDJSON), bytes (sealed secrets, wrapped
 * keys) as `{"$b64": "…"}`. Nothing in it opens without the master key, which it never holds.
 */
function encodeBytes(v: unknown): unknown {
  if (v instanceof Uint8Array) return { $b64: Buffer.from(v).toString('base64') };
  if (Array.isArray(v)) return v.map(encodeBytes);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encodeBytes(x)]));
  return v;
}

function decodeBytes(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decodeBytes);
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if (Object.keys(o).length === 1 && typeof o.$b64 === 'string') return new Uint8Array(Buffer.from(o.$b64, 'base64'));
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decodeBytes(x)]));
  }
  return v;
}

export const stateLine = (r: StateRecord) => `${JSON.stringify(encodeBytes(r))}\n`;

/** The records of an NDJSON body; a line that is not a record is a 400 naming its number. */
export function parseStateLines(text: string, firstLine = 1): StateRecord[] {
  const out: StateRecord[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    if (nestsDeeperThan(line, MAX_JSON_DEPTH)) throw new PierError('BAD_REQUEST', `line ${firstLine + i}: nested deeper than ${MAX_JSON_DEPTH} levels`);
    let r: unknown;
    try {
      r = decodeBytes(JSON.parse(line));
    } catch {
      throw new PierError('BAD_REQUEST', `line ${firstLine + i}: not JSON`);
    }
    const kind = (r as { kind?: unknown })?.kind;
    if (!(STATE_KINDS as readonly string[]).includes(kind as string)) throw new PierError('BAD_REQUEST', `line ${firstLine + i}: not a state record`);
    out.push(r as StateRecord);
  });
  return out;
}
