import { Packr } from 'msgpackr';

/**
 * The one place bytes on the bus become values and back. Records (shared structures) are off:
 * every message stands alone, so processes of different versions can always read each other.
 */
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export function encode(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function decode<T = unknown>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T;
}
