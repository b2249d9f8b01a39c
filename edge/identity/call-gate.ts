import { PierError } from '../../bus/errors.js';

/**
 * Passes of the body-less checks of provider and vault calls, remembered so that an app calling
 * with the same access token many times a second costs one bus round trip per token, not one per
 * call. A pass only decides whether the edge reads the body: the actor checks everything again on
 * the call itself, so a pass remembered a little too long (an app uninstalled in the meantime)
 * costs a body read, never an access.
 */
export class PassedGates {
  private readonly passes = new Map<string, number>();

  constructor(
    /** Longest a pass is remembered, whatever its token's expiry. */
    private readonly memoryMs = 5_000,
    /** Bound on remembered passes (keys come from callers): past it, the oldest go. */
    private readonly maxEntries = 10_000,
  ) {}

  passed(key: string, now: number): boolean {
    const until = this.passes.get(key);
    if (until === undefined) return false;
    if (now < until) return true;
    this.passes.delete(key);
    return false;
  }

  remember(key: string, tokenUntil: number, now: number): void {
    if (this.passes.size >= this.maxEntries) this.passes.delete(this.passes.keys().next().value!);
    this.passes.set(key, Math.min(tokenUntil, now + this.memoryMs));
  }

  get size(): number {
    return this.passes.size;
  }
}

/** How long one ask of the body-less checks may take before it is asked again, once. */
export const GATE_TIMEOUT_MS = 2_000;

/**
 * Before the body of a provider or vault call is read (docs/protocol.md "Provider calls"): the checks that need
 * no body, asked of the actor that serves the call (`ask`), unless a pass for the same `key` is
 * remembered. A refusal throws (answered at once, the body discarded unread), so a caller without
 * a valid token cannot make the edge buffer 8 MiB.
 */
export async function passGate(gates: PassedGates, key: string, ask: () => Promise<{ until: number }>): Promise<null> {
  const now = Date.now();
  if (gates.passed(key, now)) return null;
  // A pure check, so safe to ask twice: a request that met a replica dying at that moment (its
  // subscription not yet gone) is asked again of the others instead of failing the call.
  const gate = await ask().catch((err: unknown) => {
    if (err instanceof PierError && (err.code === 'TIMEOUT' || err.code === 'UNAVAILABLE')) return ask();
    throw err;
  });
  gates.remember(key, gate.until, now);
  return null;
}
