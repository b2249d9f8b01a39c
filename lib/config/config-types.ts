import type { TraceConfig } from '../trace/config.js';
import { BUS_ROLES, type BusRole } from '../../bus/permissions.js';
import type { Keyring } from '../crypto/keyring.js';
import type { BusTrust } from './config-trust.js';
import type { NatsAuth } from './nats-auth.js';
import type { TlsSettings } from './tls-files.js';

// The shape of Pier's one configuration object and its vocabulary; lib/config/config.ts builds it.

/** Roles a process can run: one bus identity each (bus/permissions.ts). */
export const ROLES = BUS_ROLES;
export type Role = BusRole;
/** Roles that seal, unseal or sign with the master key. */
export const KEYRING_ROLES: readonly Role[] = ['registry', 'token', 'provider', 'vault'];

export interface Ports {
  public: number;
  system: number;
  local: number;
  upload: number;
  admin: number;
}

/** The one configuration object, built and checked at start-up and passed down. */
export interface Config {
  instanceId: string;
  /** OpenTelemetry export of spans (docs/operations.md "Tracing"); trace context passes through either way. */
  tracing: TraceConfig;
  roles: Role[];
  dataDir: string;
  natsUrl: string | null;
  /** The NATS identity and TLS (NATS_CREDS or NATS_USER/NATS_PASSWORD, NATS_TLS_*). */
  natsAuth: NatsAuth;
  /** nats-server's monitoring endpoint (`http://host:8222`), read at start to tell whether JetStream syncs before it acknowledges. */
  natsMonitorUrl: string | null;
  domain: string;
  /** Address the public, system, local and upload listeners bind; admin is always loopback. */
  bindHost: string;
  ports: Ports;
  /**
   * `OS_SYSTEM_SERVER` handed to apps at install: a bare `host:port` (the platform's apps build
   * `'http://' + OS_SYSTEM_SERVER`); null = `127.0.0.1:<system port in use>`.
   */
  systemServer: string | null;
  adminToken: string;
  /** The master key (and, during a rotation, the previous one). */
  keyring: Keyring;
  /** `PIER_FREEZE_SHARED=1`: values the in-process bus shares by reference are deep-frozen, so a breach throws (the tests set it). */
  freezeShared: boolean;
  /** The bus's trust anchors and this process's role keys (lib/config/config-trust.ts). */
  busTrust: BusTrust;
  /** Host names the admin listener answers besides loopback names and IP addresses (`PIER_ADMIN_HOSTS`). */
  adminHosts: string[];
  logLevel: string;
  /** `PIER_LOG_FORMAT`: `json` (one object per line, the default) or `pretty` (for a terminal). */
  logFormat: 'json' | 'pretty';
  limits: { adminBodyBytes: number };
  /** The operator console (docs/operations.md "Console"): how long a sign-in lasts; how often its charts sample the cluster. */
  console: { sessionMs: number; sampleMs: number };
  registry: { heartbeatMs: number; maxStalenessMs: number };
  /** Added to the system clock: for hosts whose clock is known to be off, and for tests. */
  clockOffsetMs: number;
  token: { windowMs: number; failuresPerKey: number; failuresPerClient: number; failureWindowMs: number; bcryptThreads: number };
  /** `networks`: CIDRs providers and gateway callbacks may be reached in (PIER_PROVIDER_NETWORKS); empty = anywhere but the always-refused ranges. */
  provider: { timeoutMs: number; bodyBytes: number; networks: string[] };
  /** The vault is the provider `secret` / `secret.<vaultName>` / `v1`. */
  vaultName: string;
  /** Audit retention: entries older than `maxAgeMs` go, and the oldest past `maxEntries`. */
  audit: { maxAgeMs: number; maxEntries: number };
  /** What the vault keeps of earlier versions and deleted secrets (docs/vault.md "Versions"). */
  vaultVersions: { perSecret: number; scopeBytes: number; appBytes: number; deletedForMs: number; scrubAfterMs: number };
  /** Process heartbeats, and how long a silent process counts as alive. */
  heartbeatMs: number;
  peerDeadMs: number;
  /** `PIER_PROBE_PORT`: /healthz, /readyz and /metrics of this process (any roles); null: none. */
  probePort: number | null;
  /** How long a stop (SIGTERM, SIGINT) waits for work in flight before leaving it (and saying so). */
  stopTimeoutMs: number;
  /** How long a stopping edge answers /readyz 503 before it closes its listeners (a load balancer's time to notice). */
  drainMs: number;
  gateway: {
    idleMs: number;
    maxFrameBytes: number;
    outboundBufferBytes: number;
    callbackTimeoutMs: number;
    /** How long an undeliverable callback is retried before it is counted as dropped. */
    callbackRetryMs: number;
    /** Unsettled events one connection may have waiting for its app (4009 past either). */
    maxPendingEvents: number;
    maxPendingBytes: number;
    /** Live connections per user on one gateway (upgrade 429 past it). */
    maxConnsPerUser: number;
    /** What apps send to users, kept for recovery (docs/gateway.md "History and recovery"). */
    history: {
      on: boolean;
      /** Per app instance: the defaults, and the ceilings a manifest can only lower. */
      ceilings: { messages: number; bytes: number; ttlMs: number };
      /** The largest message kept (a larger one is delivered, and kept as a hole). */
      messageBytes: number;
      /** The whole store (JetStream: the stream's max_bytes, oldest dropped first). */
      storeBytes: number;
      /** Replayed bytes per user per edge per minute (a recovering upgrade is 429 past it). */
      replayBytesPerMin: number;
      /** The keys sealing it at rest, the current first: from the master key, or PIER_HISTORY_KEY; null: none, so no history. */
      keys: Buffer[] | null;
    };
  };
  upload: {
    /** Users' files: `<root>/<user>/<dest>` (docs/protocol.md "Manifest"). */
    root: string;
    chunkBytes: number;
    idleMs: number;
    maxUnfinished: number;
  };
  /** Where state lives (docs/operations.md "How writes stay correct"): LMDB under the data dir, or JetStream with `replicas`. */
  state: { kind: 'lmdb' | 'jetstream'; replicas: number };
  /** TLS on the browser-facing listeners (docs/operations.md "TLS on the browser-facing listeners"); null: plain. */
  tls: TlsSettings | null;
  /** Sidecar mode (`--app USER/APP`): the local listener serves this one app, on loopback, without headers. */
  sidecarApp: { user: string; app: string } | null;
}

/** Flags of `pier start`, by name, as given on the command line. */
export interface StartFlags {
  roles?: string;
  'data-dir'?: string;
  app?: string;
}

export const DEFAULT_PORTS: Ports = { public: 8080, system: 40080, local: 40010, upload: 40030, admin: 40090 };
