import test from 'ava';
import { upstreamError } from '../../../actors/provider/upstream.js';

// A provider that cannot be reached: the calling app hears what kind of failure (something it or
// the provider's developer can act on), never the provider's address.
const failure = (code: string, nested: boolean) => {
  const system = Object.assign(new Error(`connect ${code} 10.1.2.3:8080`), { code });
  return nested ? Object.assign(new TypeError('fetch failed'), { cause: system }) : system;
};

test('each network failure is named in words, from the error or its cause, without the address', (t) => {
  for (const nested of [false, true]) {
    t.is(upstreamError('p', 1000, failure('ENOTFOUND', nested)).message, 'provider "p" is unreachable: its endpoint\'s host name does not resolve');
    t.is(upstreamError('p', 1000, failure('ECONNREFUSED', nested)).message, 'provider "p" is unreachable: its endpoint refused the connection (nothing listens there)');
  }
  const unknown = upstreamError('p', 1000, failure('EWHATEVER', false));
  t.is(unknown.message, 'provider "p" is unreachable');
  for (const code of ['ENOTFOUND', 'ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH']) t.false(upstreamError('p', 1000, failure(code, true)).message.includes('10.1.2.3'), code);
  t.is(upstreamError('p', 1000, failure('ECONNREFUSED', false)).code, 'BAD_GATEWAY');
});
