import { RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from 'nats';
import { ConfigError } from '../config/config.js';
import { PierError } from '../../bus/errors.js';
import type { AppliedSequence } from './applied-sequence.js';
import { sayWaiting } from '../runtime/start-watch.js';

/** Helpers for the state kept on JetStream (docs/operations.md "How writes stay correct"). */

/**
 * JetStream's API errors Pier decides on, by err_code (nats-server's server/errors.json), each with
 * its name there. Code decides on these names, never on an error's text (docs/operations.md "How
 * writes stay correct"): the server's words change between releases, its codes do not.
 */
const JS_ERR_CODES = {
  /** JSNoMessageFoundErr (404): a get past the end, or of a message gone. */
  10037: 'no-message',
  /** JSStreamMsgDeleteFailedF (500): a delete of a message already gone says so ("no message found"). */
  10057: 'delete-failed',
  /** JSStreamNotFoundErr (404). */
  10059: 'stream-not-found',
  /** JSStreamNameExistErr (400): "stream name already in use with a different configuration". */
  10058: 'name-in-use',
  /** JSStreamWrongLastSequenceErrF (400): a publish whose expected last sequence is not the stream's or subject's. */
  10071: 'wrong-last-sequence',
  /**
   * JSStorageResourcesExceededErr (500), "insufficient storage resources available": a stream's
   * max_bytes is reserved when it is made, and the server's `max_file_store` (or its account's
   * `max_file`) has not that much left.
   */
  10047: 'storage-exceeded',
  /** JSStreamReplicasNotSupportedErr (500): "replicas > 1 not supported in non-clustered mode". */
  10074: 'replicas-not-supported',
  /** JSClusterNoPeersErrF (400): "no suitable peers for placement" (a cluster still forming, or too small). */
  10005: 'no-peers',
  /** JSClusterNotAvailErr (503): "JetStream system temporarily unavailable". */
  10008: 'cluster-unavailable',
  /** JSInsufficientResourcesErr (503). */
  10023: 'insufficient-resources',
} as const;

/**
 * Where nats.js gives no err_code (no API answer, or one this table does not name), the code it
 * gives: the status of the answer (`404`, `408`, `409`, `503`: no responders, JetStream not enabled),
 * or its own for a request that got no answer in time.
 */
const NATS_CODES = {
  '404': 'not-found',
  '408': 'request-timeout',
  '409': 'conflict',
  '503': 'unavailable',
  TIMEOUT: 'timeout',
  CONNECTION_TIMEOUT: 'timeout',
} as const;

/** What a JetStream failure was, by name; `other` for anything this module does not name. */
export type JsErrorReason = (typeof JS_ERR_CODES)[keyof typeof JS_ERR_CODES] | (typeof NATS_CODES)[keyof typeof NATS_CODES] | 'other';

/** The one reading of a nats.js error: its JetStream err_code by name, else its status or client code, else `other`. */
export function jsError(err: unknown): JsErrorReason {
  // Pier's own errors have codes of their own (a PierError's TIMEOUT is not nats.js's).
  if (err instanceof PierError) return 'other';
  const e = (typeof err === 'object' && err !== null ? err : {}) as { api_error?: { err_code?: unknown }; code?: unknown };
  const errCode = e.api_error?.err_code;
  if (typeof errCode === 'number' && Object.hasOwn(JS_ERR_CODES, errCode)) return JS_ERR_CODES[errCode as keyof typeof JS_ERR_CODES];
  if (typeof e.code === 'string' && Object.hasOwn(NATS_CODES, e.code)) return NATS_CODES[e.code as keyof typeof NATS_CODES];
  return 'other';
}

/**
 * A message that is not there: none at that place (a get past the end), one already gone (a delete
 * of one erased meanwhile), or nothing at all to find there (any 404: the stream itself not there).
 */
export const jsNoMessage = (err: unknown): boolean => {
  const reason = jsError(err);
  return reason === 'no-message' || reason === 'delete-failed' || reason === 'stream-not-found' || reason === 'not-found';
};

/**
 * Failures of a JetStream that is not ready yet: a fresh cluster electing its leaders or placing a
 * stream, a request with nobody to answer it yet, and a stream just made that a server does not know
 * yet (right after a stream is made, by this replica or one racing it, a server may still answer its
 * info so: a fresh chaos cluster's second token replica stopped at start with `pier: 404: stream not found`).
 */
const STARTING: ReadonlySet<JsErrorReason> = new Set<JsErrorReason>(['stream-not-found', 'no-peers', 'cluster-unavailable', 'insufficient-resources', 'unavailable', 'request-timeout', 'timeout']);

/**
 * Runs `fn` again while JetStream is not ready yet (a fresh cluster electing its leaders, a stream
 * just made not known yet to the server asked), for up to 30 s. `fn` makes what it needs (ensureStream)
 * before it reads it, so a stream truly missing is made again on the next try.
 */
export async function retryWhileStarting<T>(fn: () => Promise<T>, deadlineMs = 30_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      // A setting to change (a stream too large, too many copies asked): waiting will not change it.
      if (err instanceof ConfigError) throw err;
      if (!STARTING.has(jsError(err)) || Date.now() > end) throw err;
      sayWaiting(`JetStream: ${String((err as Error).message)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * Waits for `catchUp` at most `budgetMs`: while a stream elects a new leader its info cannot be
 * had, and reads must go on from the local view rather than wait for it.
 */
export async function withinBudget(catchUp: Promise<unknown>, budgetMs = 1_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([catchUp.catch(() => undefined), new Promise<void>((r) => (timer = setTimeout(r, budgetMs)))]);
  clearTimeout(timer);
}

/**
 * Brings followers to their streams' ends as they are now (`ends`, one per follower), or refuses
 * (503) when that cannot be done within the budget: never an answer from a state that may miss an
 * acknowledged write (the stream out of reach while its leader is elected, a follow re-attaching
 * after a node loss). `what` names the state in the refusal.
 */
export async function catchUpOrRefuse(ends: () => Promise<number[]>, followers: ReadonlyArray<AppliedSequence>, what: string, budgetMs = 1_000): Promise<void> {
  const at: { ends?: number[] } = {};
  await withinBudget(ends().then((e) => (at.ends = e)), budgetMs);
  const target = at.ends;
  if (!target) throw new PierError('UNAVAILABLE', `${what} is not reachable now; try again`);
  await withinBudget(Promise.all(followers.map((f, i) => f.reached(target[i]!, budgetMs))), budgetMs);
  if (followers.some((f, i) => f.value < target[i]!)) throw new PierError('UNAVAILABLE', `this replica is catching up with ${what}; try again`);
}

/**
 * Coalesces catch-ups: every caller that arrives before a catch-up has started shares it (its
 * stream-info request is sent after all of them arrived, so it covers every write they could have
 * heard of), so a burst of reads costs one round trip, not one each.
 */
export class SharedCatchUp {
  private next: Promise<void> | null = null;

  constructor(private readonly catchUp: () => Promise<void>) {}

  run(): Promise<void> {
    this.next ??= new Promise<void>((r) => setImmediate(r)).then(() => {
      this.next = null;
      return this.catchUp();
    });
    return this.next;
  }
}

type StreamSettings = Partial<StreamConfig> & { name: string; num_replicas: number };

/**
 * Creates a file-backed stream with limits retention (as every stream of Pier's state is), or,
 * when another replica made it first, leaves it (`existing: 'keep'`) or takes this replica's
 * settings (`'update'`: retention that the operator may change between starts). `sizedBy` names
 * the setting its max_bytes comes from, for the one line said when the server has no room for it.
 */
export async function ensureStream(jsm: JetStreamManager, config: StreamSettings, existing: 'keep' | 'update' = 'keep', sizedBy?: string): Promise<void> {
  const full = { storage: StorageType.File, retention: RetentionPolicy.Limits, ...config };
  const roomy = (err: unknown): never => {
    if (jsError(err) === 'storage-exceeded') throw noRoomFor(config, sizedBy);
    throw err;
  };
  await jsm.streams.add(full).catch(async (err: unknown) => {
    const reason = jsError(err);
    if (reason === 'replicas-not-supported') {
      // Said as the setting to change, not as NATS words.
      throw new ConfigError(`PIER_JS_REPLICAS=${config.num_replicas}: this NATS server is not a cluster (it keeps one copy): set PIER_JS_REPLICAS=1, or run a JetStream cluster of ${config.num_replicas} nodes`);
    }
    if (reason !== 'name-in-use') roomy(err);
    // A larger max_bytes than the stream had reserves the difference: refused the same way.
    if (existing === 'update') await jsm.streams.update(config.name, full).catch(roomy);
  });
}

/**
 * A stream JetStream has no room for, said as the settings to change (docs/operations.md "JetStream
 * storage"), not as nats-server's "insufficient storage resources available": which stream, what it
 * asked to reserve, the setting that sizes it, and the server's limit to raise.
 */
function noRoomFor(config: StreamSettings, sizedBy: string | undefined): ConfigError {
  const bytes = config.max_bytes ?? 0;
  const copies = config.num_replicas > 1 ? ` on each of ${config.num_replicas} servers` : '';
  const from = sizedBy ? `, from ${sizedBy}` : '';
  const lower = sizedBy ? `lower ${sizedBy}, or ` : '';
  return new ConfigError(
    `JetStream stream ${config.name}: nats-server cannot reserve the ${sizeOf(bytes)} (${bytes} bytes${from}) it asks for${copies}: ${lower}raise nats-server's jetstream { max_file_store } (an account's jetstream { max_file }, where set, bounds it too)`,
  );
}

/** Bytes as an operator reads them: 1 GiB, 512 MiB, 1.5 KiB. */
function sizeOf(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number(value.toFixed(1))} ${units[unit]}`;
}
