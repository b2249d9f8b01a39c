import { exchange, type Addressed } from './exchange.js';
import { APP_NAME, APP_NAME_RULE, USER_NAME, USER_NAME_RULE } from './subjects-registry.js';
import type { AppView, HistoryOptions } from './subjects-registry-events.js';

/**
 * The gateway history's exchanges (docs/gateway.md "History and recovery"): the edge asks, the
 * history actor (`actors/history/`, the edge role's own actor, queue group `history`) keeps and
 * reads. Every edge process runs one, with the edge's identity and in the edge's state account, so
 * any of them answers for any edge: the store is one (the JetStream stream, or the one process's
 * LMDB file). The texts carried are the same an app's `send` already puts on the bus to the edges
 * (`pier.gw.user.*`), so they are not sealed here either; at rest they are sealed by the actor.
 *
 * Trust: only an edge identity may ask (docs/security.md "The bus"), and an edge may ask for any
 * app's chain, since it serves every user; a forged request can do nothing an edge could not. It is
 * checked all the same: names are subject tokens (a user or app name of the registry's rules, never
 * a dot or a wildcard), the app id is its user and name, strings and lists are bounded, and the
 * bounds an app asks for only ever lower the operator's ceilings (`historyBoundsOf`).
 */

/** A replay answer's texts, at most (a page): well under NATS's 1 MiB max payload. Past it the edge reads on with `after`. */
export const HISTORY_PAGE_BYTES = 512 * 1024;
/** Entries one `after` answers at most. */
export const HISTORY_PAGE_ENTRIES = 1_000;

/** The JetStream stream of gateway history, in the edge's own state account (docs/security.md "The bus"). */
export const HISTORY_STREAM = 'PIER_WS_HISTORY';
export const HISTORY_SUBJECTS = 'pier.hist.>';
/** A chain's subject in that stream (`<user>.<app>.<install>`: `chainKey`), and every install's of one app instance. */
export const historySubjects = {
  chain: (key: string) => `pier.hist.${key}`,
  appInstance: (user: string, app: string) => `pier.hist.${user}.${app}.*`,
  appInstancePrefix: (user: string, app: string) => `pier.hist.${user}.${app}.`,
};

/** What the history actor needs of an app: the fields naming its chain, and its manifest's bounds. */
export type HistoryApp = Pick<AppView, 'id' | 'user' | 'name' | 'installedAt' | 'appKey'> & { history?: false | HistoryOptions };

export const historyAppOf = (app: AppView): HistoryApp => ({
  id: app.id,
  user: app.user,
  name: app.name,
  installedAt: app.installedAt,
  appKey: app.appKey,
  ...(app.websocket?.history === undefined ? {} : { history: app.websocket.history }),
});

/** An app instance's bounds: the operator's ceilings, lowered by its manifest. */
export interface HistoryBounds {
  messages: number;
  bytes: number;
  ttlMs: number;
}

/** The app's bounds (the operator's ceilings, lowered by its manifest), or null when it keeps no history. */
export function historyBoundsOf(ceilings: HistoryBounds, asked: false | HistoryOptions | undefined): HistoryBounds | null {
  if (asked === false) return null;
  return {
    messages: Math.min(ceilings.messages, asked?.messages ?? ceilings.messages),
    bytes: Math.min(ceilings.bytes, asked?.bytes ?? ceilings.bytes),
    ttlMs: Math.min(ceilings.ttlMs, (asked?.ttl ?? ceilings.ttlMs / 1000) * 1000),
  };
}

/** Why a connection that asked was not recovered (docs/protocol.md "History and recovery"). */
export type NotRecovered = 'new' | 'epoch' | 'gap' | 'off' | 'unavailable';
export const NOT_RECOVERED = ['new', 'epoch', 'gap', 'off', 'unavailable'] as const;

/** A position a client names: `<epoch>:<offset>`, as the recovery frame gave it. */
export interface Position {
  epoch: string;
  offset: number;
}

const EPOCH = /^[a-z0-9]{1,24}-[0-9a-f]{8}$/;
const POSITION = /^([a-z0-9]{1,24}-[0-9a-f]{8}):(\d{1,15})$/;

/** `recover=<epoch>:<offset>` → the position; empty → none asked; anything else → malformed (a gap, never an error). */
export function parsePosition(value: string): Position | null | 'malformed' {
  if (value === '') return null;
  const m = POSITION.exec(value);
  return m ? { epoch: m[1]!, offset: Number(m[2]) } : 'malformed';
}

/** What a recovering connection is told first, and what it is then sent. */
export interface Recovery {
  recovered: boolean;
  epoch: string | null;
  /** Where the connection is after the replay: the chain's last offset (0: nothing kept yet). */
  offset: number | null;
  missed: number;
  reason?: NotRecovered;
  /** The missed messages, in order: their offsets and texts. */
  replay: Array<{ seq: number; text: string }>;
  /** Bytes replayed. */
  bytes: number;
  /**
   * Bytes of history opened (decrypted) to decide it, replayed or not (a recovery that ends in
   * `gap` after reading costs the same): what the user's replay budget is charged, besides a fixed
   * cost per recovering upgrade (docs/protocol.md "History and recovery").
   */
  read: number;
}

/** A recovery as the actor answers it: the replay's first page, and how many messages of it follow (`after`, up to `offset`). */
export type RecoveryAnswer = Recovery & { rest: number };

/** Where a message was kept: its chain's epoch, its offset, and the offset it follows. */
export interface Kept {
  epoch: string;
  seq: number;
  prev: number;
}

/** What a reader is given: the text, or null for a hole (a message too large to keep, or a box that does not open). */
export interface KeptEntry {
  seq: number;
  prev: number;
  /** When it was kept (ms). */
  at: number;
  bytes: number;
  text: string | null;
}

const user = { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } } as const;
const appName = { type: 'string', pattern: APP_NAME, messages: { stringPattern: APP_NAME_RULE } } as const;
const count = { type: 'number', integer: true, min: 0, max: Number.MAX_SAFE_INTEGER } as const;
const offset = { type: 'number', integer: true, min: 0, max: 999_999_999_999_999 } as const;
const epoch = { type: 'string', max: 64 } as const;
/** An app's text as `send` took it (the same bound as a gateway command's). */
const text = { type: 'string', max: 16 * 1024 * 1024 } as const;

/**
 * An app's history in its manifest (`websocket.history`, docs/protocol.md "History and recovery"):
 * false, or bounds that only lower the operator's. The registry checks a manifest `strict` (a field
 * it does not know is refused); a request on the bus is not (a process of the next release may add one).
 */
export function historyOptionsRule(o: { strict: boolean }) {
  return {
    type: 'multi',
    optional: true,
    rules: [
      { type: 'equal', value: false, strict: true },
      {
        type: 'object',
        ...(o.strict ? { strict: true } : {}),
        props: {
          messages: { type: 'number', integer: true, positive: true, optional: true },
          bytes: { type: 'number', integer: true, positive: true, optional: true },
          ttl: { type: 'number', integer: true, positive: true, optional: true },
        },
      },
    ],
  } as const;
}

/** The app of every request: checked as the registry would name it, its manifest's bounds as the manifest allows them. */
const app = {
  type: 'object',
  props: {
    id: { type: 'string', max: 64 },
    user,
    name: appName,
    installedAt: { type: 'string', min: 1, max: 64 },
    appKey: { type: 'string', min: 1, max: 128 },
    history: historyOptionsRule({ strict: false }),
  },
} as const;

const keptReply = { type: 'object', props: { epoch, seq: { ...offset, min: 1 }, prev: offset } } as const;
const entry = { type: 'object', props: { seq: offset, prev: { type: 'number', integer: true, min: -1 }, at: count, bytes: count, text: { ...text, nullable: true } } } as const;

export interface KeepRequest {
  app: HistoryApp;
  text: string;
}
/** Null: the app keeps no history. `whole`: false when the text was over the size kept (a hole). */
export type KeepAnswer = { kept: (Kept & { whole: boolean }) | null };

export interface RecoverRequest {
  app: HistoryApp;
  /** The position named; absent with `malformed` false: none asked (a new connection). */
  since?: Position;
  malformed?: boolean;
}

export interface AfterRequest {
  app: HistoryApp;
  after: number;
  limit: number;
}
/** `more`: the page ended at HISTORY_PAGE_BYTES; ask again after its last entry. */
export interface AfterAnswer {
  entries: KeptEntry[];
  more: boolean;
}

const Q = 'history';

/** Request/reply with the history actor, each with its deadline; in one process passed by reference (built per call, only read). */
export const history = {
  /** Keeps a text for the app's user (an app's `send` to its own user): answered once it is durable. */
  keep: exchange<KeepRequest, KeepAnswer>({
    subject: 'pier.history.keep',
    queue: Q,
    request: { app, text },
    reply: { kept: { ...keptReply, nullable: true, props: { ...keptReply.props, whole: 'boolean' } } },
    timeoutMs: 15_000,
    shared: true,
  }) as Addressed<KeepRequest, KeepAnswer>,
  /** Where the app's chain stands: its epoch and last offset. */
  head: exchange<{ app: HistoryApp }, { epoch: string; last: number }>({
    subject: 'pier.history.head',
    queue: Q,
    request: { app },
    reply: { epoch, last: offset },
    timeoutMs: 5_000,
    shared: true,
  }) as Addressed<{ app: HistoryApp }, { epoch: string; last: number }>,
  /** What a connection asking from `since` missed, or why it cannot have it: the first page of the replay. */
  recover: exchange<RecoverRequest, RecoveryAnswer>({
    subject: 'pier.history.recover',
    queue: Q,
    request: { app, since: { type: 'object', optional: true, props: { epoch: { type: 'string', pattern: EPOCH }, offset } }, malformed: { type: 'boolean', optional: true } },
    reply: {
      recovered: 'boolean',
      epoch: { ...epoch, nullable: true },
      offset: { ...offset, nullable: true },
      missed: count,
      reason: { type: 'enum', values: [...NOT_RECOVERED], optional: true },
      replay: { type: 'array', max: 100_000, items: { type: 'object', props: { seq: offset, text } } },
      bytes: count,
      read: count,
      rest: count,
    },
    timeoutMs: 30_000,
    shared: true,
  }) as Addressed<RecoverRequest, RecoveryAnswer>,
  /** Kept entries of the app's chain after `after` (a gap an edge fills, a replay's next page): at most a page. */
  after: exchange<AfterRequest, AfterAnswer>({
    subject: 'pier.history.after',
    queue: Q,
    request: { app, after: offset, limit: { type: 'number', integer: true, min: 1, max: HISTORY_PAGE_ENTRIES } },
    reply: { entries: { type: 'array', max: HISTORY_PAGE_ENTRIES, items: entry }, more: 'boolean' },
    timeoutMs: 10_000,
    shared: true,
  }) as Addressed<AfterRequest, AfterAnswer>,
};
