import test from 'ava';
import { adminHostAllowed } from '../../../edge/identity/host.js';

test('S-3: the admin listener answers loopback names, IP addresses and configured names; a name re-bound by DNS is refused', (t) => {
  for (const host of ['127.0.0.1:40090', '127.0.0.1', 'localhost:40090', 'LOCALHOST', 'console.localhost:40090', '[::1]:40090', '10.1.2.3:9100', 'pier-admin.internal']) {
    t.true(adminHostAllowed(host, ['pier-admin.internal']), host);
  }
  for (const host of [undefined, '', 'evil.example:40090', 'evil.example', 'localhost.evil.example', '127.0.0.1.nip.io:40090', 'a b', '[::1', 'x'.repeat(400)]) {
    t.false(adminHostAllowed(host, ['pier-admin.internal']), String(host));
  }
});
