import test from 'ava';
import type { JetStreamManager } from 'nats';
import { PierError } from '../../../bus/errors.js';
import { ConfigError } from '../../../lib/config/config.js';
import { ensureStream, jsError, jsNoMessage, type JsErrorReason } from '../../../lib/state/jetstream.js';

// lib/state/jetstream.ts jsError: a JetStream failure by its err_code (nats-server's server/errors.json),
// else by the code nats.js gives, never by its text.

/** What nats.js throws for a JetStream API error: its status as `code`, the server's words, and api_error. */
const apiError = (status: number, errCode: number, description: string) => Object.assign(new Error(description), { code: String(status), api_error: { code: status, err_code: errCode, description } });

test('each err_code Pier decides on has its name, whatever the words', (t) => {
  const named: Array<[number, number, JsErrorReason]> = [
    [404, 10037, 'no-message'],
    [500, 10057, 'delete-failed'],
    [404, 10059, 'stream-not-found'],
    [400, 10058, 'name-in-use'],
    [400, 10071, 'wrong-last-sequence'],
    [500, 10047, 'storage-exceeded'],
    [500, 10074, 'replicas-not-supported'],
    [400, 10005, 'no-peers'],
    [503, 10008, 'cluster-unavailable'],
    [503, 10023, 'insufficient-resources'],
  ];
  for (const [status, errCode, name] of named) t.is(jsError(apiError(status, errCode, 'words that may change')), name, String(errCode));
});

test('without an err_code it names: the status nats.js gives, or its own code; anything else is other', (t) => {
  t.is(jsError(apiError(404, 10014, 'consumer not found')), 'not-found', 'an err_code not in the table: its status');
  t.is(jsError(Object.assign(new Error('503'), { code: '503' })), 'unavailable', 'no responders');
  t.is(jsError(Object.assign(new Error('TIMEOUT'), { code: 'TIMEOUT' })), 'timeout');
  t.is(jsError(Object.assign(new Error('request timeout'), { code: '408' })), 'request-timeout');
  t.is(jsError(new Error('no message found')), 'other', 'the words alone say nothing');
  t.is(jsError(new PierError('TIMEOUT', 'request timed out')), 'other', "a PierError's codes are not nats.js's");
  t.is(jsError(undefined), 'other');
  t.is(jsError('a string'), 'other');
});

test('a message not there: none at that place, one already gone, or any 404', (t) => {
  t.true(jsNoMessage(apiError(404, 10037, 'no message found')));
  t.true(jsNoMessage(apiError(500, 10057, 'no message found')));
  t.true(jsNoMessage(apiError(404, 10059, 'stream not found')));
  t.true(jsNoMessage(Object.assign(new Error('no message found'), { code: '404' })));
  t.false(jsNoMessage(apiError(400, 10071, 'wrong last sequence: 4')));
  t.false(jsNoMessage(new Error('no message found')), 'not by its words');
});

/** A manager whose `streams.add` fails with `err` (and whose update records that it was asked). */
function managerFailing(err: Error) {
  const calls = { updated: 0 };
  const jsm = { streams: { add: () => Promise.reject(err), update: () => ((calls.updated += 1), Promise.resolve()) } } as unknown as JetStreamManager;
  return { jsm, calls };
}

test('ensureStream decides by err_code: not a cluster and no room are settings to change; a name in use is kept or updated', async (t) => {
  const config = { name: 'S', subjects: ['s.>'], num_replicas: 3, max_bytes: 1024 };
  await t.throwsAsync(ensureStream(managerFailing(apiError(500, 10074, 'replicas > 1 not supported in non-clustered mode')).jsm, config), { instanceOf: ConfigError, message: /^PIER_JS_REPLICAS=3: this NATS server is not a cluster/ });
  await t.throwsAsync(ensureStream(managerFailing(apiError(500, 10047, 'insufficient storage resources available')).jsm, config, 'keep', 'PIER_X'), { instanceOf: ConfigError, message: /^JetStream stream S: nats-server cannot reserve the 1 KiB \(1024 bytes, from PIER_X\)/ });
  const kept = managerFailing(apiError(400, 10058, 'stream name already in use with a different configuration'));
  await t.notThrowsAsync(ensureStream(kept.jsm, config));
  t.is(kept.calls.updated, 0);
  const updated = managerFailing(apiError(400, 10058, 'stream name already in use'));
  await t.notThrowsAsync(ensureStream(updated.jsm, config, 'update'));
  t.is(updated.calls.updated, 1);
  await t.throwsAsync(ensureStream(managerFailing(apiError(400, 10065, 'subjects overlap with an existing stream')).jsm, config), { message: 'subjects overlap with an existing stream' });
});
