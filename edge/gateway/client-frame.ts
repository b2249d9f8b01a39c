import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/json-depth.js';

/** What a client frame becomes in the `message` callback's `data` (docs/protocol.md "Gateway"). */
export function frameToData(message: ArrayBuffer, isBinary: boolean): { data: unknown; ping: boolean } {
  const bytes = Buffer.from(message);
  if (isBinary) return { data: { event: '', data: { raw: bytes.toString('base64'), encoding: 'base64' } }, ping: false };
  const text = bytes.toString('utf8');
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return { data: { event: '', data: { raw: text } }, ping: false };
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { event?: unknown }).event === 'string') {
      const v = value as { event: string; data?: unknown };
      return { data: v, ping: v.event === 'ping' };
    }
  } catch {
    // not JSON: forwarded raw
  }
  return { data: { event: '', data: { raw: text } }, ping: false };
}
