import type { GatewayPosition, RecoveryInfo } from './gateway-types.js';

// How a gateway connection's frames read when it asks for recovery (docs/protocol.md "History and
// recovery"): the URL that asks, the recovery frame that answers, and the position kept after it.

export const RECOVERY_EVENT = 'pier.recovery';
export const MESSAGE_EVENT = 'pier.message';

/**
 * How the frames of the current socket are read. `deciding`: it opted in to recovery, and its first
 * frame says whether the edge speaks it (a recovery frame) or ignores the parameter (an older edge).
 */
export type FrameMode = 'deciding' | 'wrapped' | 'raw';

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const isOffset = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** The recovery frame's data, or null when `frame` is not a well-formed recovery frame. */
export function recoveryInfo(frame: unknown): RecoveryInfo | null {
  if (!isObject(frame) || frame.event !== RECOVERY_EVENT || !isObject(frame.data) || typeof frame.data.recovered !== 'boolean') return null;
  const d = frame.data;
  const info: RecoveryInfo = {
    recovered: d.recovered as boolean,
    epoch: typeof d.epoch === 'string' && d.epoch !== '' ? d.epoch : null,
    offset: isOffset(d.offset) ? d.offset : null,
    missed: isOffset(d.missed) ? d.missed : 0,
  };
  if (typeof d.reason === 'string') info.reason = d.reason;
  return info;
}

/**
 * `url` with `recover=` (no position yet) or `recover=<epoch>:<offset>`, its other query parameters
 * kept as written; a `recover` already in it is replaced, since the SDK owns that parameter.
 */
export function recoverUrl(url: string, position: GatewayPosition | null): string {
  const at = url.indexOf('?');
  const base = at < 0 ? url : url.slice(0, at);
  const kept = at < 0 ? [] : url.slice(at + 1).split('&').filter((p) => p !== '' && p.split('=')[0] !== 'recover');
  const value = position ? `${encodeURIComponent(position.epoch)}:${position.offset}` : '';
  return `${base}?${[...kept, `recover=${value}`].join('&')}`;
}

/**
 * Where the page stands once a recovery frame came (`previous`: where it stood before); null when
 * the frame gives no position (history off).
 */
export function positionAfter(info: RecoveryInfo, previous: GatewayPosition | null): GatewayPosition | null {
  if (info.epoch === null || info.offset === null) return null;
  if (info.missed === 0) return { epoch: info.epoch, offset: info.offset };
  // The frame's offset is where the replay ends, not where it starts: the `missed` messages up to it
  // are still to come. Stand before them — at the last seen when it is in this epoch and not past
  // the end, else at the epoch's start (real offsets are above 0) — so they are not taken for
  // duplicates, and a connection lost during the replay asks for the rest.
  return { epoch: info.epoch, offset: previous?.epoch === info.epoch && previous.offset <= info.offset ? previous.offset : 0 };
}
