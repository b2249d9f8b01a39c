import { parseAllDocuments } from 'yaml';
import { PierError } from '../../bus/errors.js';

/**
 * Parses YAML text into plain values. Errors name the document and the line; aliases are capped
 * by the library (no "billion laughs").
 */
export function parseYamlDocuments(text: string, what: string): unknown[] {
  const docs = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    const err = doc.errors[0];
    if (err) {
      // The library's first line says what and where ("... at line 2, column 1:"); the rest is a
      // source excerpt that does not belong in a one-line error.
      const summary = err.message.split('\n')[0].replace(/:$/, '');
      throw new PierError('BAD_REQUEST', `${what}: invalid YAML: ${summary}`);
    }
  }
  const values = list.map((doc) => doc.toJS({ maxAliasCount: 100 }) as unknown).filter((v) => v !== null && v !== undefined);
  if (values.length === 0) throw new PierError('BAD_REQUEST', `${what}: the document is empty`);
  return values;
}

export function parseYamlDocument(text: string, what: string): unknown {
  const docs = parseYamlDocuments(text, what);
  if (docs.length > 1) throw new PierError('BAD_REQUEST', `${what}: expected one YAML document, found ${docs.length}`);
  return docs[0];
}
