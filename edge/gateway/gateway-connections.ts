import type uWS from 'uWebSockets.js';
import type { Subscription } from '../../bus/bus.js';
import { appId } from '../../bus/ids.js';
import { decrement, increment } from '../../lib/runtime/counts.js';
import type { Conn } from './gateway-admission.js';

export type Ws = uWS.WebSocket<Conn>;

/**
 * The connections this edge holds: by id, by user and app (with the subscription to that user's
 * command subject, held only while a connection of it is here), and a count per user (the cap of
 * docs/protocol.md "Gateway").
 */
export class Connections {
  private readonly conns = new Map<string, Ws>();
  /** Live connections per user on this edge (docs/protocol.md "Gateway": 429 past the cap). */
  private readonly perUser = new Map<string, number>();
  private readonly byUser = new Map<string, { sockets: Set<Ws>; sub: Subscription }>();

  get size(): number {
    return this.conns.size;
  }

  get(connId: string): Ws | undefined {
    return this.conns.get(connId);
  }

  liveOf(user: string): number {
    return this.perUser.get(user) ?? 0;
  }

  /** The connections of one app instance (`<user>/<app>`) on this edge. */
  socketsOf(id: string): Iterable<Ws> {
    return this.byUser.get(id)?.sockets ?? [];
  }

  values(): Iterable<Ws> {
    return this.conns.values();
  }

  /** A connection opened; `subscribe` is called for the first of its app instance here. Answers whether it was the first. */
  add(ws: Ws, subscribe: () => Subscription): boolean {
    const c = ws.getUserData();
    this.conns.set(c.connId, ws);
    const key = appId(c.user, c.app);
    let entry = this.byUser.get(key);
    const first = !entry;
    if (!entry) {
      entry = { sockets: new Set(), sub: subscribe() };
      this.byUser.set(key, entry);
    }
    entry.sockets.add(ws);
    increment(this.perUser, c.user);
    return first;
  }

  /** A connection closed. Answers whether it was the last of its app instance here (its subscription is ended). */
  remove(ws: Ws): boolean {
    const c = ws.getUserData();
    this.conns.delete(c.connId);
    decrement(this.perUser, c.user);
    const key = appId(c.user, c.app);
    const entry = this.byUser.get(key);
    if (!entry) return false;
    entry.sockets.delete(ws);
    if (entry.sockets.size > 0) return false;
    entry.sub.unsubscribe();
    this.byUser.delete(key);
    return true;
  }

  closeWhere(match: (c: Conn) => boolean, code: number, reason: string): void {
    this.endWhere((c) => (match(c) ? [code, reason] : null));
  }

  /** Ends the connections `verdict` names a close for, in one pass (collected first: ending one changes the map). */
  endWhere(verdict: (c: Conn) => readonly [number, string] | null): void {
    const ending: Array<[Ws, readonly [number, string]]> = [];
    for (const ws of this.conns.values()) {
      const v = verdict(ws.getUserData());
      if (v) ending.push([ws, v]);
    }
    for (const [ws, [code, reason]] of ending) ws.end(code, reason);
  }

  /** Stopping: every user subscription ends. */
  unsubscribeAll(): void {
    for (const u of this.byUser.values()) u.sub.unsubscribe();
  }
}
