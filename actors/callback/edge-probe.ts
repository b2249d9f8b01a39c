import { randomBytes } from 'node:crypto';
import { at } from '../../bus/exchange.js';
import { aliveSigned, gatewayChannels, gatewaySubjects, type ProcessInfo } from '../../bus/subjects.js';
import { ask } from '../../bus/verbs.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';

/**
 * Whether an edge whose heartbeats stopped is really gone, asked before its connections' closes are
 * raised (docs/gateway.md "The exact loss window"): a starved or briefly stalled edge still holds
 * its connections and their unsettled events, and a close raised for it would drop those. It is
 * gone when nothing serves its subject (killed, stopped, cut from NATS: at once), or it does not
 * answer within the death bound (paused); an answer must be signed with the key of its heartbeats,
 * so no other process can keep a dead edge's connections open. An edge of 0.2 does not serve the
 * subject: gone, as before.
 */
export async function edgeGone(ctx: RoleContext, edge: ProcessInfo): Promise<boolean> {
  const nonce = randomBytes(16).toString('hex');
  try {
    const answer = await ask(ctx.bus, at(gatewayChannels.alive, gatewaySubjects.alive(edge.busId)), { nonce }, { timeoutMs: ctx.config.peerDeadMs });
    return !(answer.busId === edge.busId && ctx.peers.signedByBus(edge.busId, 'edge', aliveSigned(edge.busId, nonce), answer.sig, true));
  } catch {
    return true;
  }
}
