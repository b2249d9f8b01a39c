import { randomBytes } from 'node:crypto';
import type { JetStreamManager, StreamConfig, StreamInfo } from 'nats';
import { ensureStream, jsError } from '../../lib/state/jetstream.js';

/**
 * The epoch of the gateway history stream (docs/gateway.md "History and recovery"): the name every
 * edge gives the stream's offsets, so that a position a client kept from one edge is recovered on
 * any other, and a stream made again (its history lost) is known as new.
 *
 * It is written into the stream's description, which is part of the stream's configuration and
 * so the same on every server. The stream's creation time is not: each replica reports when *it*
 * made its copy, so edges that opened the stream through different leaders named it differently,
 * and live messages kept through one edge were not ordered with another's (a chaos run lost
 * acknowledged sends that way).
 */
const TAG = 'pier gateway history, epoch ';
const EPOCH = /^pier gateway history, epoch ([0-9a-z]{4,40})$/;

export function epochOf(info: Pick<StreamInfo, 'config'>): string | null {
  return EPOCH.exec(info.config.description ?? '')?.[1] ?? null;
}

/** Reads of a stream just made that may find it not answering yet (100 ms apart). */
const MAX_TRIES = 50;

const fresh = () => `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

const notFound = (err: unknown) => jsError(err) === 'stream-not-found';

type Settings = Partial<StreamConfig> & { name: string; num_replicas: number };

/**
 * Makes the stream (or takes this edge's settings into it) and answers its epoch. An epoch in the
 * stream is kept whatever happens; a stream made by 0.2 (none written) gets the one its creation
 * time gave through this leader, written once. Two edges making the stream at once: one `add`
 * wins, the other reads the winner's epoch, never overwrites it.
 */
export async function settleEpoch(jsm: JetStreamManager, config: Settings, sizedBy: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const info = await jsm.streams.info(config.name).catch((err: unknown) => {
      if (notFound(err)) return null;
      throw err;
    });
    if (info === null) {
      // A stream made a moment ago (by this edge or another) may not answer its info yet on a
      // cluster: made (or found made) again, then read again, a bounded number of times.
      if (attempt >= MAX_TRIES) throw new Error(`gateway history: the stream ${config.name} was made but does not answer after ${MAX_TRIES} tries; try again`);
      if (attempt > 0) await new Promise((r) => setTimeout(r, 100));
      // 'keep': a stream another edge made meanwhile is not touched (its epoch stands).
      await ensureStream(jsm, { ...config, description: `${TAG}${fresh()}` }, 'keep', sizedBy);
      continue;
    }
    const epoch = epochOf(info) ?? Date.parse(info.created).toString(36);
    await ensureStream(jsm, { ...config, description: `${TAG}${epoch}` }, 'update', sizedBy);
    return epoch;
  }
}

/** The epoch the stream says now (null: it cannot be read now, or says none). */
export async function currentEpoch(jsm: JetStreamManager, name: string): Promise<string | null> {
  return jsm.streams.info(name).then(epochOf, () => null);
}
