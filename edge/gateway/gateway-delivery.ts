import { appId, parseAppId } from '../../bus/ids.js';
import { CLOSE_CODES, type ConnCommand, type ConnCommandResult } from '../../bus/subjects.js';
import type { Connections, Ws } from './gateway-connections.js';
import type { GatewayMetrics } from './gateway-metrics.js';
import { messageFrame } from './history/frames.js';
import type { LiveOrder } from './history/order.js';

/** What a message held for a replaying connection counts besides its text (its entry): 64 K empty ones fill 1 MiB. */
const HELD_OVERHEAD_BYTES = 16;
/** Messages one connection may have gathered in a loop turn: past it (or past its outbound limit in bytes) they go out at once. */
export const MAX_GATHERED = 256;

/** A message to users gathered for a connection until the end of the loop turn (`Delivery.gather`). */
interface Gathered {
  text: string;
  /** Its offset in the user's history; null: a message not kept. */
  seq: number | null;
}

/** One connection's gathered messages, and their text's length (the bytes they will take, near enough). */
interface GatheredList {
  items: Gathered[];
  chars: number;
}

/**
 * What goes out to this edge's connections: the app-side commands (a send or close, by connection
 * or by user), kept messages in their offset order, and the outbound limit of each connection.
 */
export class Delivery {
  /** Kept messages in offset order on this edge (null: this edge keeps no history); set once by the gateway. */
  order: LiveOrder | null = null;

  constructor(
    private readonly connections: Connections,
    private readonly metrics: GatewayMetrics,
    private readonly outboundBufferBytes: number,
  ) {}

  /**
   * One text frame; a client that lets more than the outbound limit pile up is closed with 4008.
   * Outside uWS's own callbacks nothing is corked: callers cork (one write per socket).
   */
  send(ws: Ws, text: string): boolean {
    if (!ws.getUserData().open) return false;
    ws.send(text, false);
    if (ws.getBufferedAmount() > this.outboundBufferBytes) {
      ws.end(CLOSE_CODES.SLOW_CONSUMER, 'slow consumer: outbound buffer full');
      return false;
    }
    return true;
  }

  /** Messages to users gathered per connection in this loop turn, written at its end (`flushGathered`). */
  private gathered = new Map<Ws, GatheredList>();
  private flushTimer: NodeJS.Immediate | null = null;

  /**
   * A kept message to every connection of the chain on this edge, in its turn. It is gathered, not
   * written: at the end of the loop turn each connection gets everything gathered for it in one
   * write (one system call per connection for a burst of sends, instead of one per message: a
   * broadcast to 1,000 connections was bound by them). Whether a connection takes it (recovering,
   * had it already) is asked then, in order, as it would have been now.
   */
  sendToChain(id: string, text: string, seq: number): void {
    this.gather(this.connections.socketsOf(id), text, seq);
  }

  private gather(sockets: Iterable<Ws>, text: string, seq: number | null): void {
    for (const ws of sockets) {
      let list = this.gathered.get(ws);
      if (list === undefined) this.gathered.set(ws, (list = { items: [], chars: 0 }));
      list.items.push({ text, seq });
      list.chars += text.length;
      // Written early, so a slow consumer meets its outbound limit (4008) as it would have unbatched.
      if (list.items.length >= MAX_GATHERED || list.chars > this.outboundBufferBytes) this.flushOne(ws);
    }
    this.flushTimer ??= setImmediate(() => this.flushGathered());
  }

  /**
   * Writes what was gathered. Called at the end of the loop turn, and before anything else is
   * written to or ends a connection in order with them (an app's send by id, its close, a stop).
   */
  flushGathered(): void {
    if (this.flushTimer !== null) clearImmediate(this.flushTimer);
    this.flushTimer = null;
    if (this.gathered.size === 0) return;
    const all = this.gathered;
    this.gathered = new Map();
    for (const [ws, list] of all) {
      try {
        this.write(ws, list);
      } catch {
        // uWS refuses a socket closed without its close handler having run (then nothing can be
        // written to it anyway); the other connections still get theirs.
      }
    }
  }

  /** A connection closed: nothing gathered is written to it (uWS refuses any use of a closed socket). */
  forget(ws: Ws): void {
    this.gathered.delete(ws);
  }

  private flushOne(ws: Ws): void {
    const list = this.gathered.get(ws);
    if (list === undefined) return;
    this.gathered.delete(ws);
    this.write(ws, list);
  }

  private write(ws: Ws, list: GatheredList): void {
    if (!ws.getUserData().open) return;
    let count = 0;
    ws.cork(() => {
      for (const m of list.items) if (this.deliverTo(ws, m.text, m.seq)) count++;
    });
    this.metrics.messagesOut.inc(count);
  }

  /**
   * An app's message to one connection: its text as is (a connection that did not ask for recovery
   * sees exactly what it always did), or wrapped with its offset; held while the replay is read;
   * never an offset the connection has had.
   */
  deliverTo(ws: Ws, text: string, seq: number | null): boolean {
    const r = ws.getUserData().recover;
    if (!r) return this.send(ws, text);
    if (seq !== null && seq <= r.position && !r.replaying) return false;
    if (r.replaying) {
      r.held.push({ text, seq });
      // Bytes as they will be sent (UTF-8), plus a floor a message: many tiny ones are bounded too.
      r.heldBytes += Buffer.byteLength(text) + HELD_OVERHEAD_BYTES;
      if (r.heldBytes > this.outboundBufferBytes) ws.end(CLOSE_CODES.SLOW_CONSUMER, 'slow consumer: outbound buffer full');
      return true;
    }
    if (seq !== null) r.position = seq;
    return this.send(ws, messageFrame(text, seq));
  }

  /** A send or close for connections this edge holds (by id, or all of the named users'). */
  command(cmd: ConnCommand): ConnCommandResult {
    const kept = cmd.op === 'send' ? cmd.kept : undefined;
    // A send to users is gathered (kept: in offset order first); one naming connections is written
    // now, after what was gathered before it.
    const byUsers = cmd.op === 'send' && (cmd.connIds ?? []).length === 0;
    const toChain = byUsers && kept !== undefined && this.order !== null;
    // (First: a write may end a slow connection, which must not be among the targets then.)
    if (!byUsers) this.flushGathered();
    const targets = new Set<Ws>();
    for (const id of cmd.connIds ?? []) {
      const ws = this.connections.get(id);
      if (ws && appId(ws.getUserData().user, ws.getUserData().app) === cmd.appId) targets.add(ws);
    }
    // An app instance is one user's (`<user>/<app>`): "users" can only ever mean that user, never
    // another user's instance of the same app.
    const app = parseAppId(cmd.appId)?.app;
    for (const user of app === undefined ? [] : (cmd.users ?? [])) {
      if (appId(user, app!) !== cmd.appId) continue;
      for (const ws of this.connections.socketsOf(cmd.appId)) targets.add(ws);
    }
    let count = 0;
    if (cmd.op === 'send') {
      const text = cmd.text ?? 'null';
      if (toChain) {
        // In offset order on this edge: now, or once the message it follows is here.
        for (const ws of targets) if (ws.getUserData().open) count++;
        this.order!.accept(cmd.appId, kept!, () => this.sendToChain(cmd.appId, text, kept!.seq), text.length);
        return { count };
      }
      if (byUsers) {
        for (const ws of targets) if (ws.getUserData().open) count++;
        this.gather(targets, text, kept?.seq ?? null);
        return { count };
      }
      for (const ws of targets) {
        let sent = false;
        ws.cork(() => {
          sent = this.deliverTo(ws, text, kept?.seq ?? null);
        });
        if (sent) count++;
      }
      this.metrics.messagesOut.inc(count);
    } else {
      for (const ws of targets) {
        if (!ws.getUserData().open) continue;
        ws.end(CLOSE_CODES.CLOSED_BY_APP, 'closed by the app');
        count++;
      }
    }
    return { count };
  }
}
