import test from 'ava';
import { refusalLog } from '../../../cli/bus-refusal.js';

// A reply nats-server refuses after a reconnect (allow_responses) is a warning; every other
// refusal is an identity fault and stays an error (cli/bus-refusal.ts).
test('a refused reply to an inbox is a warning', (t) => {
  t.is(refusalLog('publish', '_INBOX.pier-admin.abc.1').level, 'warn');
});

test('hostile: other refusals stay errors (a subscription to an inbox, a publish elsewhere, an inbox look-alike)', (t) => {
  for (const [operation, subject] of [['subscription', '_INBOX.pier-vault.>'], ['publish', 'pier.vault.read'], ['publish', 'x._INBOX.pier'], ['publish', '_INBOXES.a']]) {
    t.is(refusalLog(operation, subject).level, 'error', `${operation} ${subject}`);
  }
});
