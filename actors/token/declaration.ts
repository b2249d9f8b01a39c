import { registry, token, tokenState } from '../../bus/subjects.js';
import { declareActor } from '../../lib/runtime/actor-declaration.js';

/**
 * The token actor on the bus (queue group `token`), its role's rights; its implementation is
 * index.ts, loaded only where the role runs.
 */
export const tokenDeclaration = declareActor({
  role: 'token',
  serves: { issue: token.issue },
  // Hashes with app secrets (bcrypt proofs): one of the two roles that may obtain them.
  calls: [registry.appCredentials],
  jetstream: { streams: [tokenState.stream], buckets: [], subjects: [tokenState.subject] },
});
