import test from 'ava';
import { AuditBatch } from '../../../actors/vault/audit-batch.js';
import type { AuditEntry } from '../../../bus/subjects.js';
import { until } from '../../helpers/wait.js';

// Reads and refusals are audited in batches (actors/vault/audit-batch.ts): written together, never lost on flush.

const entry = (n: number): AuditEntry => ({ at: new Date(n).toISOString(), user: 'alice', app: 'a', op: 'RetrieveSecret', workspace: 'w', env: 'prod', name: `s${n}`, outcome: 'ok' });

test('entries are written together once the batch is due, and a flush writes what is pending at once', async (t) => {
  const written: AuditEntry[][] = [];
  const batch = new AuditBatch(async (entries) => void written.push(entries));
  batch.add(entry(1));
  batch.add(entry(2));
  await until('the batch to be written by its timer', () => written.length === 1, 5_000);
  t.deepEqual(written[0].map((e) => e.name), ['s1', 's2']);
  batch.add(entry(3));
  await batch.flush();
  t.deepEqual(written[1].map((e) => e.name), ['s3'], 'flushed without waiting for the timer');
  await batch.flush();
  t.deepEqual(written[2], [], 'an empty flush writes nothing new');
});

test('a full batch (256 entries) is written at once, without its timer', async (t) => {
  const written: AuditEntry[][] = [];
  const batch = new AuditBatch(async (entries) => void written.push(entries));
  for (let i = 0; i < 256; i++) batch.add(entry(i));
  t.is(written.length, 1, 'written as the 256th came');
  t.is(written[0].length, 256);
  await batch.flush();
});

test('what `prepare` makes of each entry is made as it is added, and written with its entry, in order', async (t) => {
  const written: Array<{ entries: AuditEntry[]; prepared: unknown[] | undefined }> = [];
  const made: string[] = [];
  const batch = new AuditBatch(
    async (entries, prepared) => void written.push({ entries, prepared }),
    (e) => (made.push(e.name!), `p-${e.name}`),
  );
  batch.add(entry(1));
  batch.add(entry(2));
  t.deepEqual(made, ['s1', 's2'], 'made at once');
  await batch.flush();
  batch.add(entry(3));
  await batch.flush();
  t.deepEqual(written.map((w) => [w.entries.map((e) => e.name), w.prepared]), [
    [['s1', 's2'], ['p-s1', 'p-s2']],
    [['s3'], ['p-s3']],
  ]);
});
