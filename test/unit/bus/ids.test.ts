import test from 'ava';
import { appId, CONN_ID, edgeOfConn, newConnId, parseAppId } from '../../../bus/ids.js';

test('app ids: built and split in one place, malformed ones refused', (t) => {
  t.is(appId('alice', 'chat'), 'alice/chat');
  t.deepEqual(parseAppId('alice/chat'), { user: 'alice', app: 'chat' });
  for (const bad of ['alice', '/chat', 'alice/', 'a/b/c', '']) t.is(parseAppId(bad), undefined, bad);
});

test('connection ids name their edge and nothing else can be read from them', (t) => {
  const id = newConnId('0123456789ab');
  t.regex(id, CONN_ID);
  t.is(edgeOfConn(id), '0123456789ab');
  t.not(newConnId('0123456789ab'), id, 'unguessable: 128 random bits each');
  for (const bad of ['0123456789ab', 'zz23456789ab.AAAAAAAAAAAAAAAAAAAAAA', `${id}x`, '']) t.is(edgeOfConn(bad), undefined, bad);
});
