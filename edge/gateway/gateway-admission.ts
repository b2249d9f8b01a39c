import type { TraceContext } from '../../bus/trace.js';
import { newConnId } from '../../bus/ids.js';
import { PierError } from '../../bus/errors.js';
import { callbackTarget } from '../../lib/policy/callback-target.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { sha256Hex } from '../../lib/crypto/tokens.js';
import { identifyBrowserCaller } from '../identity/app-identity.js';
import { userTokenOf } from '../identity/user-token.js';
import { parsePosition, type Position } from '../../bus/subjects.js';

/** Per-connection data, set once at upgrade (never properties patched onto `ws`). */
export interface Conn {
  connId: string;
  user: string;
  app: string;
  userAgent: string;
  cookie: string;
  /** SHA-256 of the user token the connection was opened with: revoking it closes the connection (4004). */
  tokenDigest: string;
  seq: number;
  lastSeen: number;
  /** Closed by the cluster already (its close was raised elsewhere): no second close event. */
  silent: boolean;
  /** Ended because this edge fenced itself: its close says `edgeLost`, as the cluster's would. */
  fenced?: boolean;
  open: boolean;
  /**
   * The connection asked for recovery (`?recover=`, docs/protocol.md "History and recovery"): what it
   * named, and from then on its frames are wrapped. Undefined: frames are the app's, byte for byte.
   */
  recover?: RecoverState;
  /** The upgrade's trace (docs/operations.md "Tracing"): its events name it, each message's span links to it. */
  trace?: TraceContext;
}

export interface RecoverState {
  since: Position | null | 'malformed';
  /** The replay is being read: frames for the connection wait in `held`, frames from it in `inbound`. */
  replaying: boolean;
  held: Array<{ text: string; seq: number | null }>;
  heldBytes: number;
  inbound: Array<{ data: unknown; cookie: string | null; size: number }>;
  /** Their bytes (frame and cookie), bounded as a connection's unsettled events are (4009). */
  inboundBytes: number;
  /** The last offset this connection was sent (or was at after its replay): nothing at or below it is sent again. */
  position: number;
  /** What its replay may read at most (the app's history bytes), taken from the user's budget before it is read. */
  reserved: number;
}

/**
 * Who may open a WebSocket on this edge (docs/protocol.md, "Gateway"): a signed-in user of an app
 * with a websocket option, under the per-user cap. Answers the new connection's data, or throws
 * the refusal (the edge answers it with its usual error envelope; no connection is opened).
 */
export function admit(ctx: RoleContext, headers: Record<string, string>, liveOf: (user: string) => number, recover?: string): Conn {
  const caller = identifyBrowserCaller(headers, ctx.cache, ctx.config.domain, null);
  const { user, app } = caller;
  // The edge names no target in its events (the callback actor looks it up itself): it only
  // admits connections the callback actor will have a target for, by the same rule.
  if (!callbackTarget(app)) throw new PierError('NOT_FOUND', `app "${app.name}" has no websocket option`);
  if (liveOf(user) >= ctx.config.gateway.maxConnsPerUser) {
    throw new PierError('RATE_LIMITED', `user "${user}" has ${ctx.config.gateway.maxConnsPerUser} connections open on this gateway already`);
  }
  return {
    connId: newConnId(ctx.peers.self.busId),
    user,
    app: app.name,
    userAgent: headers['user-agent'] ?? '',
    cookie: headers.cookie ?? '',
    tokenDigest: sha256Hex(userTokenOf(headers)),
    seq: 0,
    lastSeen: Date.now(),
    silent: false,
    open: false,
    ...(recover === undefined ? {} : { recover: { since: parsePosition(recover.slice(0, 64)), replaying: true, held: [], heldBytes: 0, inbound: [], inboundBytes: 0, position: 0, reserved: 0 } }),
  };
}
