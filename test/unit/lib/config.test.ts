import test from 'ava';
import { ConfigError, normaliseSystemServer } from '../../../lib/config.js';

test('PIER_SYSTEM_URL becomes the bare host:port apps get as OS_SYSTEM_SERVER', (t) => {
  t.is(normaliseSystemServer('127.0.0.1:40080'), '127.0.0.1:40080');
  t.is(normaliseSystemServer('http://system-server.user-system-alice:80/'), 'system-server.user-system-alice:80');
  t.is(normaliseSystemServer('HTTPS://pier.example.com'), 'pier.example.com');
  t.is(normaliseSystemServer(' [::1]:40080 '), '[::1]:40080');
});

test('PIER_SYSTEM_URL that is not host[:port] stops the start with a line naming it', (t) => {
  for (const bad of ['', 'http://', 'ftp://host:1', 'host:99999', 'host/path', 'user@host:1', 'http://host:1/api', 'a b']) {
    const err = t.throws(() => normaliseSystemServer(bad), { instanceOf: ConfigError }, bad);
    t.true(err!.message.startsWith('PIER_SYSTEM_URL: must be host:port'), bad);
  }
});
