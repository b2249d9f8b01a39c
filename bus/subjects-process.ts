import { exchange } from './exchange.js';

/** What every Pier process (whatever its roles) says about itself. */
export interface ProcessInfo {
  id: string;
  /** Dot-free id used inside subjects (`pier.gw.edge.<busId>`, `pier.cb.deliver.<busId>`). */
  busId: string;
  roles: string[];
  pid: number;
  host: string;
  startedAt: string;
  /** Pier's version (package.json) this process runs: what a rolling upgrade shows in the console. */
  version?: string;
  /** The wire formats it reads and writes (bus/envelope.ts); absent from a process older than the field: 1 to 1. */
  wire?: WireWindow;
}

/** The bus formats a process speaks: every version from `oldest` to `speaks` (docs/operations.md "Upgrading"). */
export interface WireWindow {
  speaks: number;
  oldest: number;
}

/** What a process that does not say speaks: the first format. */
export const FIRST_WIRE: WireWindow = { speaks: 1, oldest: 1 };

/** Whether two processes share a wire format (release N speaks N−1 too, so N and N−1 do; N and N−2 do not). */
export const wireOverlaps = (a: WireWindow, b: WireWindow) => a.speaks >= b.oldest && b.speaks >= a.oldest;

/** What a process tells about itself when asked; the counters are summed by `pier status`. */
export interface ProcessReport {
  info: ProcessInfo;
  counters: Record<string, number>;
  /** prom-client's JSON form, so the admin listener can merge processes into one /metrics. */
  metrics: unknown[];
  /** Each actor endpoint's figures, by `<role>.<endpoint>` (lib/runtime/actor.ts). */
  endpoints?: Record<string, EndpointStats>;
  /** The process's Ed25519 signature over the fields above (its heartbeat key): any identity may answer. */
  sig?: string;
}

/** One actor endpoint's figures since the process started (the nats.js services model). */
export interface EndpointStats {
  subject: string;
  requests: number;
  errors: number;
  /** Total and mean processing time, in milliseconds. */
  processingMs: number;
  averageMs: number;
  lastError: { code: string; message: string; at: string } | null;
  /**
   * The answers that were the process's own failure (5xx: a throw, a timeout, a dependency down),
   * apart from refusals of what a client asked (4xx: a missing secret is a normal 404). Absent from
   * processes older than this field: read as unknown.
   */
  faults?: number;
  lastFault?: { code: string; message: string; at: string } | null;
}

/** What a heartbeat says: the process, and the public keys secrets are sealed to (bus/seal.ts). */
export interface Heartbeat extends ProcessInfo {
  /** This process's own key (replies and directed messages are sealed to it). */
  key: string;
  /** The role keys it opens requests to the heartbeat's role with, preferred first (two during a master key rotation). */
  roleKeys: string[];
  /** Counts up with every heartbeat of the process: a copy replayed later is older than what was heard. */
  seq: number;
  /** The process's Ed25519 public key, and its signature over the fields above (lib/runtime/peers.ts). */
  signKey: string;
  sig: string;
  /** The process is stopping: its last heartbeat (wire format 2; covered by the signature). */
  leaving?: true;
  /**
   * The same fields signed by the role's anchored key (lib/runtime/heartbeat-proof.ts): what proves the
   * sender holds more than the role's bus identity. Absent from 0.2 and from roles without an anchor.
   */
  roleSig?: string;
}

const publicKey = { type: 'string', pattern: /^[A-Za-z0-9_-]{43}$/ } as const;

export const processChannels = {
  /**
   * Scatter-gather: every process answers (no queue group) with its report. The admin listener sums
   * them into one /metrics and one `pier status`.
   */
  describe: exchange<Record<string, never>, ProcessReport>({ request: {}, reply: { info: 'object', counters: 'object', metrics: 'array' }, timeoutMs: 2_000 }),
  heartbeat: exchange<Heartbeat>({ request: {
    id: { type: 'string', max: 256 },
    busId: { type: 'string', pattern: /^[0-9a-f]{12}$/ },
    roles: { type: 'array', max: 16, items: { type: 'string', max: 32 } },
    pid: { type: 'number', integer: true },
    host: { type: 'string', max: 256 },
    startedAt: { type: 'string', max: 64 },
    version: { type: 'string', max: 64, optional: true },
    wire: { type: 'object', optional: true, props: { speaks: { type: 'number', integer: true, min: 1, max: 1_000_000 }, oldest: { type: 'number', integer: true, min: 1, max: 1_000_000 } } },
    key: publicKey,
    roleKeys: { type: 'array', max: 2, items: publicKey },
    seq: { type: 'number', integer: true, min: 0 },
    signKey: publicKey,
    sig: { type: 'string', pattern: /^[A-Za-z0-9_-]{86}$/ },
    leaving: { type: 'equal', value: true, strict: true, optional: true },
    // Added in 0.3; 0.2's schema is not strict, so it takes a heartbeat with it (and ignores it).
    roleSig: { type: 'string', pattern: /^[A-Za-z0-9_-]{86}$/, optional: true },
  }, oneWay: true }),
};

export const processSubjects = {
  describe: 'pier.process.describe',
  /**
   * Every process, every `PIER_HEARTBEAT_MS`, once per role it runs: who is alive (lib/runtime/peers.ts).
   * One subject per role, which only that role's identity may publish: a heartbeat is believed
   * for the role its subject names, so no identity can announce a replica of another role.
   */
  heartbeat: (role: string) => `pier.process.heartbeat.${role}`,
  heartbeats: 'pier.process.heartbeat.*',
};

