import test from 'ava';
import { PierError } from '../../../bus/errors.js';
import { gatewayChannels, type AppView, type GatewayEvent } from '../../../bus/subjects.js';
import { ConnQueues } from '../../../actors/callback/queues.js';
import { registeredTarget, type CallbackTarget } from '../../../lib/policy/callback-target.js';
import { until } from '../../helpers/wait.js';

// docs/security.md "The bus": the callback replica takes an app's target from its own registry view,
// never from the event; the target is kept per connection from the replica's first sight of it.
const connId = 'e00000000001.AAAAAAAAAAAAAAAAAAAAAA';
const event = (seq: number, action: GatewayEvent['action'] = 'message', who = { user: 'alice', app: 'chat' }): GatewayEvent => ({
  eventId: `${connId}:${seq}`,
  connId,
  edge: 'e00000000001',
  ...who,
  seq,
  oldest: seq,
  action,
  data: {},
  cookie: null,
});
const chat: AppView = { id: 'alice/chat', user: 'alice', name: 'chat', version: '1', host: 'chat.alice.svc', appKey: 'ak', grants: [], websocket: { port: 8080, url: '/ws/message' }, upload: null, providers: [], installedAt: '' };

/** A registry view holding `apps`; `stale` makes it answer 503 as a cache out of touch does. */
function registryView(apps: AppView[]) {
  const v = {
    apps: new Map(apps.map((a) => [a.id, a])),
    stale: false,
    app: (user: string, name: string) => {
      if (v.stale) throw new PierError('UNAVAILABLE', 'registry cache is stale');
      return v.apps.get(`${user}/${name}`);
    },
  };
  return v;
}

function replica(view: ReturnType<typeof registryView>) {
  const got: Array<[number, CallbackTarget]> = [];
  const q = new ConnQueues(async (ev, conn) => (got.push([ev.seq, conn.target]), 'delivered'), () => undefined, (user, app) => registeredTarget(view, user, app));
  return { q, got };
}

const chatTarget = { host: 'chat.alice.svc', port: 8080, url: '/ws/message' };

test("the target is the registry view's, never the event's, and is kept for the close after an uninstall", async (t) => {
  const view = registryView([chat]);
  const { q, got } = replica(view);
  // An event carrying a `target` (as the old events did, or a forger's) is taken for its app only.
  const forged = { ...event(1, 'open'), target: { host: '169.254.169.254', port: 80, url: '/latest/meta-data' } } as GatewayEvent;
  t.deepEqual(q.accept(forged), { ok: true, closed: false });
  view.apps.delete('alice/chat');
  t.deepEqual(q.accept(event(2)), { ok: true, closed: false }, 'a held connection needs no look-up');
  t.deepEqual(q.accept(event(3, 'close')), { ok: true, closed: false });
  await until('the three events delivered', () => got.length === 3);
  t.deepEqual(got, [[1, chatTarget], [2, chatTarget], [3, chatTarget]]);
});

test('an event for an app the view does not know is refused with an error and delivered nowhere', async (t) => {
  const { q, got } = replica(registryView([chat]));
  const refused = q.accept(event(1, 'open', { user: 'alice', app: 'ghost' }));
  t.like(refused, { ok: false, error: { code: 'NOT_FOUND' } });
  t.deepEqual(gatewayChannels.deliver.replyCheck(refused), [], 'the refusal is a valid answer on the wire');
  // Nothing was taken: the next event of that connection is not its continuation either.
  t.deepEqual(q.accept({ ...event(2, 'message', { user: 'alice', app: 'ghost' }), oldest: 1 }), { ok: true, closed: false, expected: 1 });
  t.is(q.size(), 0);
  // A known app's event on another connection, after it: once that one is delivered, the refused
  // ones had their chance; only it arrived.
  const other = 'e00000000001.BBBBBBBBBBBBBBBBBBBBBB';
  t.like(q.accept({ ...event(1, 'open'), connId: other, eventId: `${other}:1` }), { ok: true });
  await until('the later event of a known app to be delivered', () => got.length > 0);
  t.deepEqual(got, [[1, chatTarget]]);
});

test('an app without a websocket option, and a stale view, are refused too', (t) => {
  const view = registryView([{ ...chat, websocket: null }]);
  const { q } = replica(view);
  t.like(q.accept(event(1, 'open')), { ok: false, error: { code: 'NOT_FOUND' } });
  view.stale = true;
  t.like(q.accept(event(1, 'open')), { ok: false, error: { code: 'UNAVAILABLE' } });
});

test('an event naming another app than the connection it continues is refused', async (t) => {
  const bobs: AppView = { ...chat, id: 'bob/notes', user: 'bob', name: 'notes', host: 'notes.bob.svc' };
  const { q, got } = replica(registryView([chat, bobs]));
  t.deepEqual(q.accept(event(1, 'open')), { ok: true, closed: false });
  t.like(q.accept(event(2, 'message', { user: 'bob', app: 'notes' })), { ok: false, error: { code: 'BAD_REQUEST' } });
  await until('the open delivered', () => got.length === 1);
  t.deepEqual(got, [[1, chatTarget]]);
});

test('the reply schema takes exactly the two answers', (t) => {
  const check = gatewayChannels.deliver.replyCheck;
  t.deepEqual(check({ ok: true, closed: false }), []);
  t.deepEqual(check({ ok: true, closed: false, expected: 3 }), []);
  t.deepEqual(check({ ok: false, error: { code: 'NOT_FOUND', message: 'x' } }), []);
  t.not(check({ ok: true }).length, 0, 'an ack says whether the connection is closed');
  t.not(check({ ok: false }).length, 0, 'a refusal says why');
});
