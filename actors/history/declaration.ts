import { history, HISTORY_STREAM, HISTORY_SUBJECTS } from '../../bus/subjects.js';
import { declareActor } from '../../lib/runtime/actor-declaration.js';

/**
 * The gateway history actor on the bus (queue group `history`): the edge role's own actor, so these
 * are rights of the edge role; its implementation is index.ts, loaded only by an edge that keeps history.
 */
export const historyDeclaration = declareActor({
  role: 'edge',
  serves: {
    historyKeep: history.keep,
    historyHead: history.head,
    historyRecover: history.recover,
    historyAfter: history.after,
  },
  // The stream lives in the edge's own state account (PIER_STATE=jetstream); an uninstall purges an app's subjects.
  jetstream: { streams: [HISTORY_STREAM], purges: [HISTORY_STREAM], buckets: [], subjects: [HISTORY_SUBJECTS] },
});
