import { createHash } from 'node:crypto';
import type { HistoryApp, HistoryBounds, Kept, KeptEntry } from '../../bus/subjects.js';

export type { HistoryBounds, Kept, KeptEntry };

/**
 * Gateway history (docs/gateway.md "History and recovery"): what an app sent to its user's
 * connections, kept per app instance (`<user>/<app>`, one user's) and per install, so a browser
 * that reconnects gets what it missed. Each kept message has an offset: the store's sequence
 * (growing, not by one); the store's order of a chain's messages is the chain's order. A message
 * records the offset its sender followed (`prev`); edges order live messages by the one really
 * before it, read back after it was kept (two senders may have followed the same one).
 */

/** One app instance's history in one install: a reinstall starts another chain (and epoch). */
export interface HistoryChain {
  user: string;
  app: string;
  /** 8 hex digits naming the install (its time and key): the new install never sees the old one's history. */
  install: string;
}

export function chainOf(app: Pick<HistoryApp, 'id' | 'user' | 'name' | 'installedAt' | 'appKey'>): HistoryChain {
  return { user: app.user, app: app.name, install: createHash('sha256').update(`${app.id}|${app.installedAt}|${app.appKey}`).digest('hex').slice(0, 8) };
}

export const chainKey = (c: HistoryChain) => `${c.user}.${c.app}.${c.install}`;

/** Where a chain stands: its epoch (the store's and the install's) and its last offset (0: nothing kept yet). */
export interface HistoryHead {
  epoch: string;
  last: number;
}

export interface HistoryStore {
  readonly kind: 'lmdb' | 'jetstream';
  head(chain: HistoryChain): Promise<HistoryHead>;
  /** Keeps `text` (null: too large, kept as a hole) after the chain's last; answers once it is durable (replicated, on JetStream). */
  append(chain: HistoryChain, text: string | null, bytes: number, bounds: HistoryBounds): Promise<Kept>;
  /** Whether `seq` is a message of the chain still kept, and when it was kept (null: not this chain's, or gone). */
  at(chain: HistoryChain, seq: number): Promise<{ at: number } | null>;
  /**
   * The chain's entries after offset `after`, in the store's order (complete: nothing of the chain
   * after `after` is left out), at most `limit`, and no more than `maxBytes` of them read and opened:
   * the first entry past it ends the list, returned unopened (`text: null`, as a hole).
   */
  after(chain: HistoryChain, after: number, limit: number, maxBytes?: number): Promise<KeptEntry[]>;
  /** Forgets every install's history of an app instance (uninstall). */
  drop(user: string, app: string): Promise<void>;
  close(): Promise<void>;
}

export const epochOf = (storeEpoch: string, chain: HistoryChain) => `${storeEpoch}-${chain.install}`;
/** What a sealed message is bound to: its chain and the offset kept before it. */
export const sealBound = (chain: HistoryChain, prev: number) => `pier history|${chainKey(chain)}|${prev}`;
