import { PierError } from '../../bus/errors.js';
import { tokenKey } from '../../lib/crypto/tokens.js';

/**
 * Passes of the body-less checks of provider and vault calls, remembered so that an app calling
 * with the same access token many times a second costs one bus round trip per token, not one per
 * call. A pass only decides whether the edge reads the body: the actor checks everything again on
 * the call itself, so a pass remembered a little too long (an app uninstalled in the meantime)
 * costs a body read, never an access.
 *
 * Remembered by token, then by what the call asks with it (`what`): no key holding the whole token
 * is built per call, and the token is found by its end (lib/crypto/tokens.ts `tokenKey`), the
 * whole of it compared.
 */
export class PassedGates {
  private readonly passes = new Map<string, { token: string; byWhat: Map<string, number> }>();
  private count = 0;

  constructor(
    /** Longest a pass is remembered, whatever its token's expiry. */
    private readonly memoryMs = 5_000,
    /** Bound on remembered passes (keys come from callers): past it, the first token's oldest go. */
    private readonly maxEntries = 10_000,
  ) {}

  /** A pass remembered under one key alone (`passedFor` with nothing more asked). */
  passed(key: string, now: number): boolean {
    return this.passedFor(key, '', now);
  }

  remember(key: string, tokenUntil: number, now: number): void {
    this.rememberFor(key, '', tokenUntil, now);
  }

  passedFor(token: string, what: string, now: number): boolean {
    const key = tokenKey(token);
    const held = this.passes.get(key);
    if (held === undefined || held.token !== token) return false;
    const until = held.byWhat.get(what);
    if (until === undefined) return false;
    if (now < until) return true;
    this.forget(key, what);
    return false;
  }

  rememberFor(token: string, what: string, tokenUntil: number, now: number): void {
    const key = tokenKey(token);
    let held = this.passes.get(key);
    // Another token of the same end: its passes go (`count` stays the number remembered).
    if (held !== undefined && held.token !== token) {
      this.count -= held.byWhat.size;
      this.passes.delete(key);
      held = undefined;
    }
    if (!held?.byWhat.has(what)) {
      if (this.count >= this.maxEntries) {
        const [oldKey, old] = this.passes.entries().next().value!;
        this.forget(oldKey, old.byWhat.keys().next().value!);
        held = this.passes.get(key);
      }
      if (!held) this.passes.set(key, (held = { token, byWhat: new Map() }));
      this.count++;
    }
    held.byWhat.set(what, Math.min(tokenUntil, now + this.memoryMs));
  }

  private forget(key: string, what: string): void {
    const held = this.passes.get(key);
    if (!held?.byWhat.delete(what)) return;
    this.count--;
    if (held.byWhat.size === 0) this.passes.delete(key);
  }

  get size(): number {
    return this.count;
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
export async function passGate(gates: PassedGates, token: string, what: string, ask: () => Promise<{ until: number }>): Promise<null> {
  const now = Date.now();
  if (gates.passedFor(token, what, now)) return null;
  // A pure check, so safe to ask twice: a request that met a replica dying at that moment (its
  // subscription not yet gone) is asked again of the others instead of failing the call.
  const gate = await ask().catch((err: unknown) => {
    if (err instanceof PierError && (err.code === 'TIMEOUT' || err.code === 'UNAVAILABLE')) return ask();
    throw err;
  });
  gates.rememberFor(token, what, gate.until, now);
  return null;
}
