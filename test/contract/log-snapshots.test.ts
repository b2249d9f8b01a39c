import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type JetStreamClient } from 'nats';
import { encode } from '../../bus/codec.js';
import { ensureStream } from '../../lib/state/jetstream.js';
import { LogSnapshots, type LogNames } from '../../lib/state/log-snapshots.js';
import { NatsServer } from '../helpers/nats-server.js';

// Snapshots of a replicated log on a real JetStream (one node).

const names: LogNames = { stream: 'TLOG', subject: 'tlog.entry', snapshotStream: 'TLOG_SNAP', snapshotPrefix: 'tlog.snap' };

/**
 * Two replicas snapshot at once: the slower one checked for a newer snapshot before the faster one
 * landed, and published its record after. Its record, covering less, became "the newest": a
 * replica opening from it found the log purged past it (by the faster one) and reloaded from it
 * again and again (a chaos run saw an upload replica never become ready). A record is published
 * only if no other record landed since the check.
 */
test('a snapshot record is not published over a newer one that landed after the check', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-snapshots-'));
  const node = await NatsServer.start(['-js', '-sd', join(dir, 'js')]);
  const nc = await connect({ servers: node.url });
  t.teardown(async () => {
    await nc.close();
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const js = nc.jetstream();
  const jsm = await nc.jetstreamManager();
  await ensureStream(jsm, { name: names.stream, subjects: [names.subject], num_replicas: 1 });
  await ensureStream(jsm, { name: names.snapshotStream, subjects: [`${names.snapshotPrefix}.part`, `${names.snapshotPrefix}.done`], num_replicas: 1 });
  for (let i = 0; i < 40; i++) await js.publish(names.subject, encode(i));

  const fast = new LogSnapshots(js, jsm, names, 'registry');
  t.true(await fast.write({ seq: 10, revision: 10 }, encode('at 10')));
  // The slow writer's record goes out only after the fast writer wrote one covering more.
  let raced = false;
  const slowJs = new Proxy(js, {
    get(target, prop) {
      if (prop !== 'publish') return Reflect.get(target, prop);
      return async (subject: string, data: Uint8Array, options?: object) => {
        if (subject.endsWith('.done') && !raced) {
          raced = true;
          t.true(await fast.write({ seq: 30, revision: 30 }, encode('at 30')));
        }
        return target.publish(subject, data, options);
      };
    },
  }) as JetStreamClient;
  const slow = new LogSnapshots(slowJs, jsm, names, 'registry');
  t.false(await slow.write({ seq: 20, revision: 20 }, encode('at 20')), 'the slower snapshot is not the newest');
  t.true(raced);
  const newest = await fast.newest();
  t.is(newest!.seq, 30);
  t.is(newest!.dump, 'at 30');
  // The log was purged below the previous snapshot (11), never past the newest one.
  t.true((await jsm.streams.info(names.stream)).state.first_seq <= 31);
});
