import { join } from 'node:path';
import { connect } from 'nats';
import { scopeKey, secretKey } from '../actors/vault/store.js';
import { readCredsFile } from '../lib/config/nats-auth.js';
import { shredScanBlobs } from '../test/helpers/shred-scan.js';
import { vaultEntries } from '../test/helpers/vault-streams.js';
import type { HistoryLine } from './history.js';
import type { WorkloadContext } from './workload.js';

/**
 * Destroyed means gone (docs/vault.md "Destroyed"), judged at the end of a run: every
 * message the vault's buckets still hold, read with its own state login, opened with the master
 * key and every key those messages yield. A value whose version was destroyed (answered ok) and
 * that nothing can have copied since (no restore of that version; no create, nor a write of
 * unknown outcome, between it and the destroy) must not open from a box sealed under a value key:
 * its key went with it. One sealed with its data key (written before every replica
 * sealed under value keys) may still open from the secrets bucket's history until the hourly
 * sweep: counted, not an anomaly. The final reads' values must open (the reading works).
 * Recorded as one history line (`vault` `shred`), which checks/vault.ts judges.
 */
export async function judgeShredding(ctx: WorkloadContext, user: string, workspace: string, keys: readonly string[]): Promise<void> {
  const { destroyed, live } = destroyedValues(ctx.history.lines);
  const login = readCredsFile(join(ctx.cluster.bus.dir, 'vault.nats.env')).state.vault;
  if (!login) return;
  const nc = await connect({ servers: ctx.cluster.bus.url, tls: { caFile: ctx.cluster.bus.ca.cert }, user: login.user, pass: login.password, inboxPrefix: `_INBOX.${login.user}` });
  try {
    const entries = await vaultEntries(await nc.jetstreamManager());
    const blobs = entries.flatMap((e) => e.secretBytes.map((blob) => ({ file: `${e.bucket}#${e.seq}`, blob })));
    const scope = scopeKey(user, workspace, 'prod');
    const scan = shredScanBlobs(blobs, [Buffer.from(ctx.cluster.secrets.PIER_MASTER_KEY, 'hex')], [scope], keys.map((k) => secretKey(scope, k)), [...destroyed, ...live]);
    const opened = (v: string, format: string) => scan.found.some((f) => f.value === v && f.format === format);
    ctx.history.info('vault', 'shred', {
      destroyed: destroyed.length,
      underValueKeys: destroyed.filter((v) => opened(v, 'value key')),
      underDataKeys: destroyed.filter((v) => opened(v, 'data key')).length,
      live: live.length,
      liveUnopened: live.filter((v) => !scan.found.some((f) => f.value === v)),
      messages: entries.length,
    });
  } finally {
    await nc.close();
  }
}

/** From the vault workload's history: values destroyed for good, and the values the final reads saw. */
export function destroyedValues(lines: readonly HistoryLine[]): { destroyed: string[]; live: string[] } {
  const invokes = new Map<string, HistoryLine>();
  const outcomes = new Map<string, HistoryLine>();
  for (const l of lines) {
    if (l.kind !== 'vault') continue;
    if (l.phase === 'invoke') invokes.set(l.id, l);
    else if (l.phase === 'ok' || l.phase === 'fail' || l.phase === 'unknown') outcomes.set(l.id, l);
  }
  const ops = [...invokes.values()].map((i) => ({ i, o: outcomes.get(i.id) }));
  const destroyed: string[] = [];
  for (const { i, o } of ops) {
    if (i.op !== 'destroy' || o?.phase !== 'ok' || typeof i.version !== 'number') continue;
    const key = i.key;
    const sameKey = ops.filter((x) => x.i.key === key);
    // The value written as that version: the newest acknowledged create or update answering it, before the destroy.
    const writes = sameKey.filter((x) => (x.i.op === 'create' || x.i.op === 'update') && x.o?.phase === 'ok' && x.o.version === i.version && x.o.n < i.n);
    const w = writes.at(-1);
    if (!w || typeof w.i.value !== 'string') continue;
    // A restore of that version copies the value (sealed anew, under a key of its own: it stays
    // readable there, rightly); an undelete moves it, it does not copy it.
    const copied = sameKey.some((x) => x.o?.phase !== 'fail' && x.i.op === 'restore' && x.i.version === i.version);
    // A write of unknown outcome, or a create (a new generation numbers its versions from 1 again),
    // between the write and the destroy: which value the destroyed version held is not known.
    const blurred = sameKey.some((x) => x.i.n > w.i.n && x.i.n < i.n && ((x.i.op === 'create' && x.o?.phase !== 'fail') || ((x.i.op === 'create' || x.i.op === 'update') && x.o?.phase !== 'ok' && x.o?.phase !== 'fail')));
    if (!copied && !blurred) destroyed.push(w.i.value);
  }
  const live = ops.filter(({ i, o }) => i.op === 'read' && i.final === true && o?.phase === 'ok' && typeof o.value === 'string').map(({ o }) => String(o!.value));
  return { destroyed: [...new Set(destroyed)], live: [...new Set(live)] };
}
