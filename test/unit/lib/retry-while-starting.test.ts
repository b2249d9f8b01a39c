import test from 'ava';
import { ConfigError } from '../../../lib/config/config.js';
import { retryWhileStarting } from '../../../lib/state/jetstream.js';

/** nats-server's JSStreamNotFoundErr (server/errors.json). */
const JS_STREAM_NOT_FOUND = 10059;

// What JetStream's client throws for an API error: the code, the words, and api_error.
const apiError = (code: number, errCode: number, description: string) => Object.assign(new Error(description), { code: String(code), api_error: { code, err_code: errCode, description } });

test('a stream just made that a server does not know yet (10059) is tried again, not a failed start', async (t) => {
  let calls = 0;
  const value = await retryWhileStarting(async () => {
    calls++;
    if (calls < 3) throw apiError(404, JS_STREAM_NOT_FOUND, 'stream not found');
    return 'opened';
  }, 10_000);
  t.is(value, 'opened');
  t.is(calls, 3);
});

test('another 404 (a message not found) is not waited on', async (t) => {
  let calls = 0;
  await t.throwsAsync(
    retryWhileStarting(async () => {
      calls++;
      throw apiError(404, 10037, 'no message found');
    }, 10_000),
    { message: 'no message found' },
  );
  t.is(calls, 1);
});

test('a setting to change is not waited on', async (t) => {
  let calls = 0;
  await t.throwsAsync(
    retryWhileStarting(async () => {
      calls++;
      throw new ConfigError('PIER_JS_REPLICAS=3: not a cluster');
    }, 10_000),
    { instanceOf: ConfigError },
  );
  t.is(calls, 1);
});

test('a stream still not known after the deadline fails with its own words', async (t) => {
  await t.throwsAsync(retryWhileStarting(async () => Promise.reject(apiError(404, JS_STREAM_NOT_FOUND, 'stream not found')), 300), { message: 'stream not found' });
});
