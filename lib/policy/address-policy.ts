import { lookup } from 'node:dns/promises';
import { BlockList, isIP, isIPv4 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { PierError } from '../../bus/errors.js';

type Family = 'ipv4' | 'ipv6';

/** Link-local and cloud-metadata ranges: never dialled, whatever a name resolves to. */
const NEVER: Array<[string, number, Family]> = [
  ['169.254.0.0', 16, 'ipv4'], // link-local, and 169.254.169.254 metadata of every major cloud
  ['fe80::', 10, 'ipv6'], // link-local
  ['fd00:ec2::', 64, 'ipv6'], // AWS IPv6 metadata (fd00:ec2::254)
];

/** An IPv4-mapped IPv6 address (`::ffff:169.254.169.254`) is judged as the IPv4 address it is. */
function normalise(address: string): { address: string; family: Family } {
  const bare = address.replace(/^\[|\]$/g, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped) return { address: mapped[1], family: 'ipv4' };
  return { address: bare, family: isIPv4(bare) ? 'ipv4' : 'ipv6' };
}

/** `PIER_PROVIDER_NETWORKS` as a list to check against (the config has validated each CIDR). */
export function networksList(cidrs: string[]): BlockList | null {
  if (cidrs.length === 0) return null;
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [net, prefix] = cidr.split('/');
    list.addSubnet(net, Number(prefix), isIPv4(net) ? 'ipv4' : 'ipv6');
  }
  return list;
}

/**
 * Which addresses Pier's outbound HTTP may dial: provider calls (docs/protocol.md "Manifest") and gateway
 * callbacks to apps (section 9). Both go to addresses that an app's registration names, so both are
 * held to one policy. Checked on the address actually dialled, after name resolution, so a name
 * that resolves to a forbidden address at call time is refused too: never link-local or metadata;
 * never Pier's own ports (its listeners, NATS) on an address of this host; only inside
 * `PIER_PROVIDER_NETWORKS` when the operator set it.
 */
export class AddressPolicy {
  private readonly never = new BlockList();

  constructor(
    /** Ports of Pier on this host: configured listeners, bound listeners, NATS. Read at each call. */
    private readonly ownPorts: () => ReadonlySet<number>,
    private readonly allowed: BlockList | null,
  ) {
    for (const [net, prefix, family] of NEVER) this.never.addSubnet(net, prefix, family);
  }

  /** Why `address:port` may not be dialled, or null when it may. */
  refusal(rawAddress: string, port: number): string | null {
    const { address, family } = normalise(rawAddress);
    if (this.never.check(address, family)) return 'a link-local or cloud-metadata address';
    if (this.ownPorts().has(port) && isThisHost(address)) return "one of Pier's own ports";
    if (this.allowed && !this.allowed.check(address, family)) return 'outside PIER_PROVIDER_NETWORKS';
    return null;
  }

  /** The first address of `hostname` that may be dialled; a 502 saying why otherwise. */
  async resolve(hostname: string, port: number): Promise<string> {
    const host = hostname.replace(/^\[|\]$/g, '');
    const candidates = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    let why = 'no address';
    for (const address of candidates) {
      const refusal = this.refusal(address, port);
      if (refusal === null) return address;
      why = refusal;
    }
    throw new PierError('BAD_GATEWAY', `its endpoint leads to ${why}`, { data: { refused: true } });
  }
}

/** The error `resolve` throws: the address was refused by the policy (not merely unreachable). */
export function isPolicyRefusal(err: unknown): err is PierError {
  return err instanceof PierError && (err.data as { refused?: boolean } | undefined)?.refused === true;
}

function isThisHost(address: string): boolean {
  if (address === '0.0.0.0' || address === '::' || address === '::1' || address.startsWith('127.')) return true;
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => normalise(i.address).address === address));
}
