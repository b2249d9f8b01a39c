import { at } from '../../bus/exchange.js';
import { offeredStream, provider, streamSubject } from '../../bus/subjects.js';
import { declareActor, opens } from '../../lib/runtime/actor-declaration.js';

/**
 * The provider-proxy actor on the bus (queue group `provider`), its role's rights; its
 * implementation is index.ts, loaded only where the role runs.
 */
export const providerDeclaration = declareActor({
  role: 'provider',
  serves: {
    call: provider.call,
    authorize: provider.authorize,
    // Large bodies (bus/byte-stream.ts), each on a stream subject of its own: the provider's answer
    // offered to the edge (it takes it), the caller's request taken from the edge's offer.
    offers: opens(at(offeredStream.take, streamSubject('provider', '>'))),
    takes: opens(at(offeredStream.pieces, streamSubject('provider', '>'))),
  },
  // The same two the other way: the edge's offers taken, the provider's answers pushed to the edge.
  calls: [at(offeredStream.take, streamSubject('edge', '>')), at(offeredStream.pieces, streamSubject('edge', '>'))],
});
