import { at } from '../../bus/exchange.js';
import { gatewayChannels, gatewaySubjects, registry, uploadNotices } from '../../bus/subjects.js';
import { declareActor } from '../../lib/runtime/actor-declaration.js';

/**
 * The callback actor on the bus, its role's rights; its implementation is index.ts, loaded only
 * where the role runs.
 */
export const callbackDeclaration = declareActor({
  role: 'callback',
  serves: {
    uploaded: uploadNotices.deliver,
    // Each edge sends all events of one connection to this replica's own subject.
    deliver: at(gatewayChannels.deliver, gatewaySubjects.deliver),
    // An edge uses a replica only after it answered here (it is a callback replica, with this key).
    hello: at(gatewayChannels.hello, gatewaySubjects.hello),
  },
  hears: {
    // An edge sends a connection's events elsewhere now (this replica was paused or cut off).
    // Only from the edge process holding the connection, signed by it, and recent (docs/security.md).
    moved: at(gatewayChannels.moved, gatewaySubjects.moved),
  },
  calls: [
    // Signs callbacks with app callback keys (derived from app secrets; never the secrets themselves).
    registry.appCallbackKey,
    // Asks an edge gone silent whether it still runs (edge-probe.ts).
    at(gatewayChannels.alive, gatewaySubjects.alive),
  ],
  emits: [at(gatewayChannels.settled, gatewaySubjects.settled)],
});
