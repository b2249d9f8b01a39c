// The admin API's answers of what is live (connections, uploads, the figures' history) and the
// console's session: types only. edge/admin/api.ts declares the routes that answer them and
// re-exports them, so callers keep one import.

export interface ConnectionRow {
  id: string;
  user: string;
  userAgent: string;
  /** The bus id of the edge holding it, from its id; null when the id names none. */
  edge: string | null;
  /** That edge's process id (as `pier status` names it); null when no live edge has that bus id. */
  process: string | null;
}

export interface AppConnections {
  user: string;
  app: string;
  conns: ConnectionRow[];
}

export interface CloseRequest {
  user: string;
  app: string;
  conns: string[];
}

export interface Closed {
  closed: number;
}

export interface UploadRow {
  id: string;
  user: string;
  app: string;
  /** The target in the app's view. */
  path: string;
  offset: number;
  /** null while a tus upload's length is deferred. */
  size: number | null;
  protocol: 'tus' | 'upload';
  writing: boolean;
  /** ms since the epoch */
  updatedAt: number;
}

export interface Uploads {
  uploads: UploadRow[];
  truncated: boolean;
}

export interface MetricsSample {
  /** ms since the epoch */
  at: number;
  httpRequestsPerSecond: number;
  /** p99 of HTTP handling over the interval (upper bound of its histogram bucket), ms; null when nothing was served. */
  httpP99Ms: number | null;
  providerCallsPerSecond: number;
  vaultOpsPerSecond: number;
  wsMessagesPerSecond: number;
  callbackRetriesPerSecond: number;
  busRefusalsPerSecond: number;
  wsConnections: number;
  uploadsActive: number;
  /** Requests per second by route (`<listener> <METHOD path>`), the interval's busiest. */
  routes: Record<string, number>;
}

/** The 0.1 names of a sample's fields, kept for one release (removed in 0.3). */
export interface MetricsSampleFormerNames {
  /** @deprecated */ http_requests_per_s: number;
  /** @deprecated */ http_p99_ms: number | null;
  /** @deprecated */ provider_calls_per_s: number;
  /** @deprecated */ vault_ops_per_s: number;
  /** @deprecated */ ws_messages_per_s: number;
  /** @deprecated */ callback_retries_per_s: number;
  /** @deprecated */ bus_refusals_per_s: number;
  /** @deprecated */ ws_connections: number;
  /** @deprecated */ uploads_active: number;
}

export interface MetricsHistoryAnswer {
  everyMs: number;
  /** @deprecated 0.1 name of `everyMs`, removed in 0.3. */
  every_ms: number;
  samples: Array<MetricsSample & MetricsSampleFormerNames>;
}

/** The console's session (`/console/session`): the CSRF token its changes carry. */
export interface ConsoleSession {
  csrf: string;
  expiresAt: string;
  /** @deprecated 0.1 name of `expiresAt`, removed in 0.3. */
  expires_at: string;
}
