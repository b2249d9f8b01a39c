import type { WireError } from './errors.js';

/**
 * What travels on the bus, as both its interface (`bus.ts`) and its envelope (`envelope.ts`) speak
 * of it: a message with its headers, and the one answer format. Here so that neither imports the other.
 */

export type Headers = Record<string, string>;

export interface BusMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Headers | undefined;
  /** Where a reply goes, when the sender expects one. */
  readonly reply: string | undefined;
}

/** The one answer format (also what the in-process bus hands back: `LocalReply` in bus.ts). */
export type Reply<Res> = { ok: true; data: Res } | { ok: false; error: WireError };
