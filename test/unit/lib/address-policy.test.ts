import test from 'ava';
import { AddressPolicy, networksList } from '../../../lib/policy/address-policy.js';

const own = new Set([40090, 4222]);

test('never link-local or metadata, whatever the port or the spelling', (t) => {
  const p = new AddressPolicy(() => own, null);
  for (const a of ['169.254.169.254', '169.254.0.1', '::ffff:169.254.169.254', 'fe80::1', '[fe80::1]', 'fd00:ec2::254']) t.truthy(p.refusal(a, 80), a);
  t.is(p.refusal('10.1.2.3', 80), null);
  t.is(p.refusal('93.184.216.34', 443), null);
});

test("Pier's own ports are refused on this host's addresses only", (t) => {
  const p = new AddressPolicy(() => own, null);
  for (const a of ['127.0.0.1', '127.1.2.3', '::1', '0.0.0.0', '::ffff:127.0.0.1']) t.is(p.refusal(a, 40090), "one of Pier's own ports", a);
  t.is(p.refusal('127.0.0.1', 8081), null, 'another port on loopback is a provider like any other');
  t.is(p.refusal('10.9.9.9', 40090), null, 'the same port on another host is not ours');
});

test('PIER_PROVIDER_NETWORKS restricts providers to its networks', async (t) => {
  const p = new AddressPolicy(() => own, networksList(['10.0.0.0/8', 'fd00:1::/32']));
  t.is(p.refusal('10.2.3.4', 80), null);
  t.is(p.refusal('fd00:1::5', 80), null);
  t.is(p.refusal('192.168.1.1', 80), 'outside PIER_PROVIDER_NETWORKS');
  await t.throwsAsync(p.resolve('192.168.1.1', 80), { message: 'its endpoint leads to outside PIER_PROVIDER_NETWORKS' });
  t.is(await p.resolve('10.0.0.1', 80), '10.0.0.1');
});
