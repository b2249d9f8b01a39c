import { closeSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A port for a listener a test (or a chaos run) starts later, in another process. Two ways such a
 * port was lost between its pick and its bind ("port taken", seen in CI's upgrade run and in
 * upgrade setups under load), both closed here:
 *
 * - The kernel hands out a port of its ephemeral range for `listen(0)`, and the same range as the
 *   source port of every outgoing connection: a client of another test could hold it by the time
 *   the listener binds. Ports are picked below that range instead, where no connection takes one.
 * - Outside the kernel's choice, two processes (ava's workers) could pick the same one: each port
 *   handed out is claimed with a file created exclusively in one folder of the temp dir, and not
 *   handed out again while the claim is younger than CLAIM_MS (a run's whole life).
 *
 * The port is also bound once on every interface, as Pier's listeners bind it, to see it is free now.
 */

const CLAIMS = join(tmpdir(), 'pier-test-ports');
const CLAIM_MS = 30 * 60_000;
const LOWEST = 10_000;

/** The first port of the kernel's ephemeral range (Linux), or 32768, its usual start. */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > LOWEST + 1_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Claims `port` for this caller: false when a claim younger than CLAIM_MS holds it. */
function claim(port: number): boolean {
  const path = join(CLAIMS, String(port));
  try {
    closeSync(openSync(path, 'wx'));
    return true;
  } catch {
    try {
      if (Date.now() - statSync(path).mtimeMs < CLAIM_MS) return false;
      unlinkSync(path); // an old run's claim
      closeSync(openSync(path, 'wx'));
      return true;
    } catch {
      return false;
    }
  }
}

function bindsNow(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}

/** A free port below the ephemeral range that no other caller was given in the last half hour. */
export async function freeListenerPort(): Promise<number> {
  mkdirSync(CLAIMS, { recursive: true });
  const highest = ephemeralStart() - 1;
  for (let tries = 0; tries < 1_000; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (highest - LOWEST + 1));
    if (claim(port) && (await bindsNow(port))) return port;
  }
  throw new Error(`no free port between ${LOWEST} and ${highest} after 1,000 tries (claims in ${CLAIMS})`);
}
