import type { ValidationSchema } from 'fastest-validator';
import { exchange, type Codec, type Exchange } from './exchange.js';

/**
 * The byte stream's subjects and exchanges (its verbs and rules: `byte-stream.ts`). A stream's
 * pieces are requests of a `pieces` exchange on a subject built at run time: a PATCH's write session
 * (`uploadSubjects.session`, `uploadStream`), or an offered stream's (`streamSubject`, `offeredStream`).
 */

export type PieceKind = 'data' | 'end' | 'abort' | 'discard';
const KINDS: readonly PieceKind[] = ['data', 'end', 'abort', 'discard'];

/** One piece. Its bytes travel as the message payload itself (no encoding, no copy), `seq` and `kind` in headers. */
export interface Piece {
  seq: number;
  kind: PieceKind;
  data: Uint8Array;
}

export const PIECE_HEADERS = { seq: 'pier-seq', kind: 'pier-kind' } as const;

/** A piece whose headers are not ours is taken as `discard` with seq -1: its receiver refuses it. */
const pieceCodec: Codec = {
  encode: (value) => {
    const p = value as Piece;
    return { data: p.data, headers: { [PIECE_HEADERS.seq]: String(p.seq), [PIECE_HEADERS.kind]: p.kind } };
  },
  decode: (data, headers) => {
    const kind = headers?.[PIECE_HEADERS.kind] ?? 'data';
    const seq = Number(headers?.[PIECE_HEADERS.seq] ?? -1);
    return { seq: Number.isInteger(seq) ? seq : -1, kind: KINDS.includes(kind as PieceKind) ? kind : 'discard', data };
  },
};

const PIECE_SCHEMA: ValidationSchema = { seq: { type: 'number', integer: true, min: -1 }, kind: { type: 'enum', values: [...KINDS] }, data: { type: 'any' } };

/** A byte stream's exchange: `Ack` is what its receiver answers each piece with. Subjects are built at run time. */
export function pieces<Ack>(reply: ValidationSchema, timeoutMs: number): Exchange<Piece, Ack> {
  return exchange<Piece, Ack>({ request: PIECE_SCHEMA, reply, timeoutMs, codec: pieceCodec });
}

// Offered streams: large bodies between the edge and the provider actor.

/**
 * Who offers or takes a stream names its subject, `pier.stream.<owner>.<random>`: the bus
 * permissions let the edge reach only the provider's and the reverse (bus/permissions.ts).
 */
export const STREAM_OWNERS = ['edge', 'provider'] as const;
export type StreamOwner = (typeof STREAM_OWNERS)[number];
export const streamSubject = (owner: StreamOwner, id: string) => `pier.stream.${owner}.${id}`;

/** An offered stream's subject: a stream subject of either owner, with its random id. */
export const OFFERED_STREAM = /^pier\.stream\.(edge|provider)\.[0-9a-f]{24}$/;

export const offeredStream = {
  /**
   * The taker's request to an offer: push to `to`, where it listens. `to` must be a stream subject of
   * the taker the offer was made for: the offer pushes with its own rights, and a thief of the other
   * role's credentials must not aim those (and a body a client chose) at another subject.
   */
  take: exchange<{ to: string }, Record<string, never>>({ request: { to: { type: 'string', pattern: OFFERED_STREAM } }, reply: {}, timeoutMs: 60_000 }),
  /** The pieces an offer pushes to its taker. */
  pieces: pieces<Record<string, never>>({}, 30_000),
};
