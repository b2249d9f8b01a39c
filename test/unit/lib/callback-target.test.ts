import test from 'ava';
import type { AppView } from '../../../bus/subjects.js';
import { callbackTarget, callbackUrl, registeredTarget } from '../../../lib/policy/callback-target.js';

const app: AppView = { id: 'alice/chat', user: 'alice', name: 'chat', version: '1', host: 'chat.alice.svc', appKey: 'ak', grants: [], websocket: { port: 8080, url: '/ws/message' }, upload: null, providers: [], installedAt: '' };

test("an app's callback target is its registered host with its websocket port and path", (t) => {
  t.deepEqual(callbackTarget(app), { host: 'chat.alice.svc', port: 8080, url: '/ws/message' });
  t.is(callbackTarget({ ...app, websocket: null }), null, 'no websocket option, no callbacks');
});

test('the registry view decides: an unknown app or one without callbacks is NOT_FOUND', (t) => {
  const cache = { app: (user: string, name: string) => (user === 'alice' && name === 'chat' ? app : undefined) };
  t.deepEqual(registeredTarget(cache, 'alice', 'chat'), { host: 'chat.alice.svc', port: 8080, url: '/ws/message' });
  t.throws(() => registeredTarget(cache, 'bob', 'chat'), { message: /bob\/chat/ });
  const none = { app: () => ({ ...app, websocket: null }) };
  t.throws(() => registeredTarget(none, 'alice', 'chat'), { message: /takes no callbacks/ });
});

test('the URL brackets an IPv6 host, so its colons are not taken for a port', (t) => {
  t.is(callbackUrl({ host: 'chat.alice.svc', port: 8080, url: '/ws' }), 'http://chat.alice.svc:8080/ws');
  t.is(callbackUrl({ host: '10.0.0.5', port: 80, url: '/cb' }), 'http://10.0.0.5:80/cb');
  t.is(callbackUrl({ host: 'fd00::5', port: 80, url: '/cb' }), 'http://[fd00::5]:80/cb');
});
