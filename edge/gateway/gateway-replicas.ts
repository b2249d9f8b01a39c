import { at } from '../../bus/exchange.js';
import { ask } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { gatewayChannels, gatewaySubjects } from '../../bus/subjects.js';
import type { Peers } from '../../lib/runtime/peers.js';

/** FNV-1a: a fast, stable hash for rendezvous choice. */
function fnv(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The callback replicas an edge sends gateway events to (gateway-forwarder.ts): those alive that
 * answered a hello, and for each connection one of them by rendezvous hashing, so every edge picks
 * the same one and a lost replica moves only its own connections.
 */
export class CallbackReplicas {
  /** Callback replicas that answered a hello: only they are chosen (a heartbeat alone is not enough). */
  private readonly answered = new Set<string>();
  /** Hellos in flight, and when one last failed (asked again a second later at most), by replica. */
  private readonly asking = new Set<string>();
  private readonly failedAt = new Map<string, number>();
  private readonly helloTimer: NodeJS.Timeout;

  constructor(
    private readonly bus: Bus,
    private readonly peers: Peers,
  ) {
    // Greet replicas as they appear, so the first connection does not wait for it.
    this.helloTimer = setInterval(() => this.usable(), 1_000);
    this.helloTimer.unref();
    this.usable();
  }

  /** A replica died: greeted afresh if it comes back. */
  forget(busId: string): void {
    this.answered.delete(busId);
    this.failedAt.delete(busId);
  }

  close(): void {
    clearInterval(this.helloTimer);
  }

  /**
   * The live callback replicas that answered a hello on their own subject: a heartbeat may name a
   * replica nobody serves (docs/security.md "The bus"); a hello answered proves a callback identity
   * listens there. Those not greeted yet are greeted now.
   */
  usable(): Array<{ busId: string }> {
    const alive = this.peers.alive('callback');
    const now = Date.now();
    for (const p of alive) {
      if (this.answered.has(p.busId) || this.asking.has(p.busId) || now - (this.failedAt.get(p.busId) ?? 0) < 1_000) continue;
      this.asking.add(p.busId);
      ask(this.bus, at(gatewayChannels.hello, gatewaySubjects.hello(p.busId)), {})
        .then((r) => {
          if (r.busId === p.busId) this.answered.add(p.busId);
          else this.failedAt.set(p.busId, Date.now());
        })
        .catch(() => this.failedAt.set(p.busId, Date.now()))
        .finally(() => this.asking.delete(p.busId));
    }
    return alive.filter((p) => this.answered.has(p.busId));
  }

  /** The replica a connection's events go to now (null: none usable). */
  choose(connId: string): string | null {
    let best: string | null = null;
    let bestScore = -1;
    for (const p of this.usable()) {
      const score = fnv(`${connId}|${p.busId}`);
      if (score > bestScore) {
        best = p.busId;
        bestScore = score;
      }
    }
    return best;
  }
}
