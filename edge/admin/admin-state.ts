import { ask } from '../../bus/verbs.js';
import { PierError } from '../../bus/errors.js';
import { stateEndpoints } from '../../bus/subjects.js';
import { RawReply, type AdminDeps, type AnswerHandlers } from './answers.js';
import { parseStateLines, stateLine } from './state-file.js';

/** The admin routes of the state as a whole (docs/protocol.md "Admin API"): `pier state export|import`. */
export type StateRouteName = 'stateExport' | 'stateImport';

const EXPORT_PAGE = 500;

export function stateAnswers(deps: AdminDeps): AnswerHandlers<StateRouteName> {
  return {
    /** `pier state export`: every record of the registry and the vault, as NDJSON, streamed page by page. */
    stateExport: async () => {
      async function* lines(): AsyncGenerator<Uint8Array> {
        for (const ep of [stateEndpoints.registryExport, stateEndpoints.vaultExport]) {
          for (let offset = 0; ; offset += EXPORT_PAGE) {
            const page = await ask(deps.bus, ep, { offset, limit: EXPORT_PAGE });
            yield Buffer.from(page.records.map(stateLine).join(''));
            if (page.done) break;
          }
        }
      }
      return new RawReply({ status: 200, headers: { 'content-type': 'application/x-ndjson' }, stream: lines() });
    },
    /**
     * `pier state import`: one batch of records (NDJSON, within the admin body limit). The first
     * batch (`?first=true`) is refused unless the registry and the vault are empty.
     */
    stateImport: async (req) => {
      const records = parseStateLines(req.body.toString('utf8'), Number(req.query.get('line') ?? '1') || 1);
      if (req.query.get('first') === 'true') {
        const [r, v] = await Promise.all([ask(deps.bus, stateEndpoints.registryEmpty, {}), ask(deps.bus, stateEndpoints.vaultEmpty, {})]);
        if (!r.empty || !v.empty) throw new PierError('CONFLICT', 'the target already holds state: import goes into an empty registry and vault');
      }
      const registryKinds = new Set(['user', 'token', 'app', 'provider']);
      let imported = 0;
      for (let i = 0; i < records.length; i += 1_000) {
        const chunk = records.slice(i, i + 1_000);
        const reg = chunk.filter((r) => registryKinds.has(r.kind));
        const vlt = chunk.filter((r) => !registryKinds.has(r.kind));
        if (reg.length > 0) imported += (await ask(deps.bus, stateEndpoints.registryImport, { records: reg })).imported;
        if (vlt.length > 0) imported += (await ask(deps.bus, stateEndpoints.vaultImport, { records: vlt })).imported;
      }
      return { imported };
    },
  };
}
