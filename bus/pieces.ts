import type { Bus, Subscription } from './bus.js';
import { encode } from './codec.js';
import { asPierError } from './errors.js';
import { accept, answerable } from './rpc.js';
import { PIECE_HEADERS, type Piece, type PieceAck } from './subjects-upload.js';
import { compile } from './validation.js';

/**
 * A PATCH's bytes on their way to the upload replica's write session: each piece is a request whose
 * payload is the bytes themselves (no encoding, no copy), `seq` and `kind` in headers; the session
 * answers each with a schema-checked ack.
 */
const KINDS: readonly Piece['kind'][] = ['data', 'end', 'abort', 'discard'];
const checkAck = compile({
  ok: 'boolean',
  error: { type: 'object', optional: true, props: { code: { type: 'string', max: 64 }, message: { type: 'string', max: 4096 } } },
  record: { type: 'object', optional: true },
  complete: { type: 'boolean', optional: true },
});

/** Sends one piece; never rejects (a piece in flight may fail before it is awaited): a failure is an ack with `ok: false`. */
export function sendPiece(bus: Bus, subject: string, seq: number, kind: Piece['kind'], data: Uint8Array, timeoutMs: number): Promise<PieceAck> {
  return bus
    .request(subject, data, { timeoutMs, headers: { [PIECE_HEADERS.seq]: String(seq), [PIECE_HEADERS.kind]: kind } })
    .then((m): PieceAck => accept<PieceAck>(m, checkAck) ?? { ok: false, error: { code: 'BAD_GATEWAY', message: 'the upload writer answered nonsense' } })
    .catch((err: unknown): PieceAck => {
      const e = asPierError(err);
      return { ok: false, error: { code: e.code, message: e.code === 'INTERNAL' ? 'upload failed' : `the upload writer is gone (${e.message})` } };
    });
}

/**
 * Receives a write session's pieces; `handle` answers each (the session orders them itself). A piece
 * whose headers are not ours is taken as `discard` with seq -1 (the session refuses it).
 */
export function receivePieces(bus: Bus, subject: string, handle: (piece: Piece) => Promise<PieceAck>): Subscription {
  return bus.subscribe(subject, (msg) => {
    if (!answerable(msg)) return;
    const kind = msg.headers?.[PIECE_HEADERS.kind] ?? 'data';
    const seq = Number(msg.headers?.[PIECE_HEADERS.seq] ?? -1);
    const piece: Piece = { seq: Number.isInteger(seq) ? seq : -1, kind: KINDS.includes(kind as Piece['kind']) ? (kind as Piece['kind']) : 'discard', data: msg.data };
    // A handler's throw is answered at once as its typed error (the reply convention of `serve`),
    // never left to the sender's deadline.
    void Promise.resolve()
      .then(() => handle(piece))
      .then(
        (ack) => ack,
        (err: unknown): PieceAck => {
          // Its reason too: the edge decides on it (an upload busy, an offset that does not match).
          const { code, message, reason } = asPierError(err).toWire();
          return { ok: false, error: { code, message, ...(reason ? { reason } : {}) } };
        },
      )
      .then((ack) => {
        if (msg.reply) bus.publish(msg.reply, encode(ack));
      })
      .catch(() => undefined); // publishing to a closed bus at shutdown: nobody is left to answer
  });
}
