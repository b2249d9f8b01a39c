import { ConfigError } from './config-error.js';

/** Every environment variable Pier reads, and nothing else reads the environment. */
export const ENV = {
  dataDir: 'PIER_DATA_DIR',
  roles: 'PIER_ROLES',
  natsUrl: 'NATS_URL',
  natsCreds: 'NATS_CREDS',
  natsUser: 'NATS_USER',
  natsPassword: 'NATS_PASSWORD',
  natsTlsCa: 'NATS_TLS_CA',
  natsTlsCert: 'NATS_TLS_CERT',
  natsTlsKey: 'NATS_TLS_KEY',
  natsMonitorUrl: 'PIER_NATS_MONITOR_URL',
  domain: 'PIER_DOMAIN',
  bindHost: 'PIER_BIND_HOST',
  publicPort: 'PIER_PUBLIC_PORT',
  systemPort: 'PIER_SYSTEM_PORT',
  localPort: 'PIER_LOCAL_PORT',
  uploadPort: 'PIER_UPLOAD_PORT',
  adminPort: 'PIER_ADMIN_PORT',
  systemServerUrl: 'PIER_SYSTEM_URL',
  adminToken: 'PIER_ADMIN_TOKEN',
  masterKey: 'PIER_MASTER_KEY',
  previousMasterKey: 'PIER_MASTER_KEY_PREVIOUS',
  busAnchors: 'PIER_BUS_ANCHORS',
  callbackKey: 'PIER_CALLBACK_KEY',
  adminKey: 'PIER_ADMIN_KEY',
  adminHosts: 'PIER_ADMIN_HOSTS',
  logLevel: 'PIER_LOG_LEVEL',
  logFormat: 'PIER_LOG_FORMAT',
  adminBodyBytes: 'PIER_ADMIN_BODY_BYTES',
  registryHeartbeatMs: 'PIER_REGISTRY_HEARTBEAT_MS',
  registryMaxStalenessMs: 'PIER_REGISTRY_MAX_STALENESS_MS',
  clockOffsetMs: 'PIER_CLOCK_OFFSET_MS',
  tokenWindowMs: 'PIER_TOKEN_WINDOW_MS',
  tokenFailuresPerKey: 'PIER_TOKEN_FAILURES_PER_KEY',
  tokenFailuresPerClient: 'PIER_TOKEN_FAILURES_PER_CLIENT',
  tokenFailureWindowMs: 'PIER_TOKEN_FAILURE_WINDOW_MS',
  bcryptThreads: 'PIER_BCRYPT_THREADS',
  providerTimeoutMs: 'PIER_PROVIDER_TIMEOUT_MS',
  providerBodyBytes: 'PIER_PROVIDER_BODY_BYTES',
  providerNetworks: 'PIER_PROVIDER_NETWORKS',
  vaultName: 'PIER_VAULT_NAME',
  auditRetentionDays: 'PIER_AUDIT_RETENTION_DAYS',
  auditMaxEntries: 'PIER_AUDIT_MAX_ENTRIES',
  vaultVersions: 'PIER_VAULT_VERSIONS',
  vaultHistoryScopeBytes: 'PIER_VAULT_HISTORY_SCOPE_BYTES',
  vaultHistoryUserBytes: 'PIER_VAULT_HISTORY_USER_BYTES',
  vaultDeletedDays: 'PIER_VAULT_DELETED_DAYS',
  heartbeatMs: 'PIER_HEARTBEAT_MS',
  peerDeadMs: 'PIER_PEER_DEAD_MS',
  stopTimeoutMs: 'PIER_STOP_TIMEOUT_MS',
  drainMs: 'PIER_DRAIN_MS',
  otelEndpoint: 'OTEL_EXPORTER_OTLP_ENDPOINT',
  otelTracesEndpoint: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  otelServiceName: 'OTEL_SERVICE_NAME',
  otelTracesSampler: 'OTEL_TRACES_SAMPLER',
  otelTracesSamplerArg: 'OTEL_TRACES_SAMPLER_ARG',
  otelTracesExporter: 'OTEL_TRACES_EXPORTER',
  otelSdkDisabled: 'OTEL_SDK_DISABLED',
  traceHintsPerSecond: 'PIER_TRACE_HINTS_PER_S',
  traceQueueSpans: 'PIER_TRACE_QUEUE_SPANS',
  probePort: 'PIER_PROBE_PORT',
  wsIdleMs: 'PIER_WS_IDLE_MS',
  wsMaxFrameBytes: 'PIER_WS_MAX_FRAME_BYTES',
  wsOutboundBytes: 'PIER_WS_OUTBOUND_BUFFER_BYTES',
  callbackTimeoutMs: 'PIER_CALLBACK_TIMEOUT_MS',
  callbackRetryMs: 'PIER_CALLBACK_RETRY_MS',
  wsPendingEvents: 'PIER_WS_PENDING_EVENTS',
  wsPendingBytes: 'PIER_WS_PENDING_BYTES',
  wsConnsPerUser: 'PIER_WS_CONNS_PER_USER',
  wsHistory: 'PIER_WS_HISTORY',
  wsHistoryMessages: 'PIER_WS_HISTORY_MESSAGES',
  wsHistoryBytes: 'PIER_WS_HISTORY_BYTES',
  wsHistoryTtlS: 'PIER_WS_HISTORY_TTL_S',
  wsHistoryMessageBytes: 'PIER_WS_HISTORY_MESSAGE_BYTES',
  wsHistoryStoreBytes: 'PIER_WS_HISTORY_STORE_BYTES',
  wsReplayBytesPerMin: 'PIER_WS_REPLAY_BYTES_PER_MIN',
  historyKey: 'PIER_HISTORY_KEY',
  uploadChunkBytes: 'PIER_UPLOAD_CHUNK_BYTES',
  uploadIdleMs: 'PIER_UPLOAD_IDLE_MS',
  uploadMaxUnfinished: 'PIER_UPLOAD_MAX_UNFINISHED',
  uploadRoot: 'PIER_UPLOAD_ROOT',
  state: 'PIER_STATE',
  jsReplicas: 'PIER_JS_REPLICAS',
  tlsCert: 'PIER_TLS_CERT',
  tlsKey: 'PIER_TLS_KEY',
  tlsSniDir: 'PIER_TLS_SNI_DIR',
  tlsListeners: 'PIER_TLS_LISTENERS',
  consoleSessionMs: 'PIER_CONSOLE_SESSION_MS',
  consoleSampleMs: 'PIER_CONSOLE_SAMPLE_MS',
  freezeShared: 'PIER_FREEZE_SHARED',
} as const;

/** The environment as read: any variable may be absent. */
export type Env = Record<string, string | undefined>;

/** An integer setting as the last start read it: what docs/protocol.md "Environment" must say (test/unit/docs-reference.test.ts). */
export interface IntegerSetting {
  fallback: number;
  min: number;
  max: number;
}

/** Every integer setting read so far, by variable: the reference is checked against these values, not a copy of them. */
export const INTEGER_SETTINGS = new Map<string, IntegerSetting>();

/** An integer variable within [min, max], `fallback` when unset or empty; else a ConfigError naming the variable. */
export function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  INTEGER_SETTINGS.set(name, { fallback, min, max });
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got "${raw}"`);
  return Number(raw);
}
