import test from 'ava';
import { judgeDurability } from '../../../lib/state/nats-durability.js';

// What a process on PIER_STATE=jetstream says at start of the server's acknowledgements
// (docs/operations.md "What an acknowledgement means"): one line where it cannot tell or the
// server does not sync before it acknowledges; nothing when it does.
const varz = (config: unknown) => async () => ({ jetstream: { config } });
const unreachable = async () => {
  throw new Error('connect ECONNREFUSED 127.0.0.1:8222');
};

test('2.9 cannot sync before it acknowledges: said, whatever the monitor says', async (t) => {
  const v = await judgeDurability('2.9.10', 'http://n1:8222', varz({ sync_always: true }));
  t.false(v.ok);
  t.regex(v.line!, /^nats-server 2\.9\.10 cannot sync before it acknowledges \(sync_interval needs 2\.10 or later\)/);
});

test('2.10 without a monitor URL: cannot tell, and says which setting would tell', async (t) => {
  const v = await judgeDurability('2.10.27', null, unreachable);
  t.false(v.ok);
  t.regex(v.line!, /cannot tell whether nats-server 2\.10\.27 syncs before it acknowledges: set PIER_NATS_MONITOR_URL/);
});

test('2.10 with sync_interval: always (sync_always in /varz): nothing to say', async (t) => {
  t.deepEqual(await judgeDurability('2.10.27', 'http://n1:8222', varz({ sync_always: true, sync_interval: 120e9 })), { ok: true });
});

test('2.10 on its default (every 2 minutes): said, with the interval', async (t) => {
  const v = await judgeDurability('2.10.27', 'http://n1:8222', varz({ sync_interval: 120e9 }));
  t.false(v.ok);
  t.regex(v.line!, /^nats-server does not sync before it acknowledges \(it syncs every 120 s\)/);
});

test('hostile: a monitor that does not answer, answers junk or no JetStream: cannot tell, never a throw', async (t) => {
  t.regex((await judgeDurability('2.10.27', 'http://n1:8222', unreachable)).line!, /did not answer \(connect ECONNREFUSED/);
  for (const junk of [null, 'x'.repeat(10_000), 42, { jetstream: null }, { jetstream: { config: 'no' } }]) {
    const v = await judgeDurability('2.10.27', 'http://n1:8222', async () => junk);
    t.false(v.ok, JSON.stringify(junk).slice(0, 40));
    t.regex(v.line!, /^cannot tell whether nats-server syncs before it acknowledges: http:\/\/n1:8222\/varz says nothing of JetStream/);
  }
  // An unknown version (the INFO not read) is not called old.
  t.regex((await judgeDurability(null, null, unreachable)).line!, /^cannot tell whether nats-server syncs/);
});
