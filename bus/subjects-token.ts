import { exchange } from './exchange.js';

/** A bcrypt hash as the access endpoint takes it: `$2a$`/`$2b$`/`$2y$`, two-digit cost, 53 characters. */
export const BCRYPT_HASH = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/;
export const BCRYPT_MIN_COST = 4;
export const BCRYPT_MAX_COST = 12;

export interface Perm {
  group: string;
  dataType: string;
  version: string;
  ops: string[];
}

/** The body of `POST /permission/v1alpha1/access` (docs/protocol.md "Access tokens"). */
export interface AccessRequest {
  app_key: string;
  timestamp: number;
  token: string;
  perm: Perm;
}

export interface IssueRequest extends AccessRequest {
  /** The caller's address, for the failure rate limit. */
  client: string;
}

export interface IssuedAccess {
  access_token: string;
  expired_at: string;
}

/** Checked at the edge (input) and again by the token actor (trust boundary). */
export const accessRequestSchema = {
  $$strict: false,
  app_key: { type: 'string', min: 1, max: 128 },
  timestamp: { type: 'number', integer: true, convert: true },
  token: {
    type: 'string',
    max: 60,
    pattern: BCRYPT_HASH,
    messages: { stringPattern: 'must be a bcrypt hash ($2a$, $2b$ or $2y$)', stringMax: 'must be a bcrypt hash ($2a$, $2b$ or $2y$)' },
  },
  perm: {
    type: 'object',
    $$strict: false,
    props: {
      group: { type: 'string', min: 1, max: 128 },
      dataType: { type: 'string', min: 1, max: 128 },
      version: { type: 'string', min: 1, max: 32 },
      ops: { type: 'array', empty: false, max: 64, items: { type: 'string', min: 1, max: 256 } },
    },
  },
} as const;

export const token = {
  /** Verifies the app's bcrypt proof and issues a 5-minute access token for the granted ops. */
  issue: exchange<IssueRequest, IssuedAccess>({ subject: 'pier.token.issue', queue: 'token', request: { ...accessRequestSchema, client: { type: 'string', max: 64 } }, timeoutMs: 10_000, seal: { request: 'token', reply: true, grant: 'token' } }),
};

/**
 * The token actor's failure limits on JetStream (PIER_STATE=jetstream): each counted failure is a
 * message kept for one failure window, so every token replica, and one started later, counts the
 * failures seen by all of them.
 */
export const tokenState = {
  stream: 'PIER_TOKEN_FAILURES',
  subject: 'pier.state.token.failures',
} as const;

/** One shared failure: which limiter, its key (app key + address, or address), when. */
export interface SharedFailure {
  limiter: 'key' | 'client';
  key: string;
  at: number;
  origin: string;
}

export const sharedFailureSchema = {
  limiter: { type: 'enum', values: ['key', 'client'] },
  key: { type: 'string', max: 512 },
  at: { type: 'number', integer: true, min: 0 },
  origin: { type: 'string', max: 64 },
} as const;

