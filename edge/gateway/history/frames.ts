import type { Recovery } from '../../../bus/subjects.js';

/**
 * The frames a connection that asked for recovery gets (docs/protocol.md "History and recovery").
 * `text` is already JSON (the app's payload as sent): spliced in, never parsed again.
 */
export function messageFrame(text: string, seq: number | null): string {
  return seq === null ? `{"event":"pier.message","data":{"payload":${text}}}` : `{"event":"pier.message","data":{"offset":${seq},"payload":${text}}}`;
}

/** The first frame of such a connection: recovered or not (and why), and where it now is. */
export function recoveryFrame(r: Pick<Recovery, 'recovered' | 'epoch' | 'offset' | 'missed' | 'reason'>): string {
  return JSON.stringify({ event: 'pier.recovery', data: { recovered: r.recovered, epoch: r.epoch, offset: r.offset, missed: r.missed, ...(r.reason ? { reason: r.reason } : {}) } });
}
