import type { LocalServer, MessageHandler, Subscription } from './bus.js';

/** A subscription of the in-process bus. */
export interface MemorySubscription extends Subscription {
  readonly tokens: string[];
  readonly queue: string | undefined;
  readonly handler: MessageHandler;
  readonly local: LocalServer | undefined;
  active: boolean;
}

/** Who hears one subject: the plain subscriptions, and the members of each queue group (one is picked per message). */
interface Route {
  readonly plain: MemorySubscription[];
  readonly groups: MemorySubscription[][];
}

/** The route of a subject nobody hears (shared: routes are never changed once made). */
const NOBODY: Route = Object.freeze({ plain: Object.freeze([]) as unknown as MemorySubscription[], groups: Object.freeze([]) as unknown as MemorySubscription[][] });

/** Subjects whose receivers are remembered at once: some name users or connections, so there is a bound (past it, all are forgotten). */
const MAX_ROUTES = 10_000;

/** True when a concrete subject matches a subscription's pattern (`*` one token, `>` the rest). */
export function subjectMatches(pattern: string[], subject: string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p === '>') return subject.length > i;
    if (i >= subject.length) return false;
    if (p !== '*' && p !== subject[i]) return false;
  }
  return pattern.length === subject.length;
}

const isWildcard = (sub: MemorySubscription) => sub.tokens.some((t) => t === '*' || t === '>');

/**
 * The in-process bus's subscriptions, and who hears each subject: found once per subject, then
 * remembered until a subscription that may hear it comes or goes.
 */
export class RouteTable {
  /** Subscriptions with wildcards, scanned when a subject is first seen (then cached in `routes`). */
  private subscriptions: MemorySubscription[] = [];
  /** Subscriptions to exact subjects, found by lookup. */
  private exact = new Map<string, MemorySubscription[]>();
  /**
   * Who hears each subject published so far, until a subscription changes (then rebuilt on demand).
   * Inbox subjects are never kept here (each is used once); bounded, emptied when full.
   */
  private routes = new Map<string, Route>();
  /** Wildcard subscriptions that can match an inbox subject (`*.…`, `>`, `_INBOX.…`): usually none. */
  private wildcardsOnInboxes = 0;

  add(sub: MemorySubscription): void {
    const wildcard = isWildcard(sub);
    this.changed(sub, wildcard, 1);
    if (wildcard) this.subscriptions.push(sub);
    else this.exact.set(sub.subject, [...(this.exact.get(sub.subject) ?? []), sub]);
  }

  remove(sub: MemorySubscription): void {
    const wildcard = isWildcard(sub);
    this.changed(sub, wildcard, -1);
    if (wildcard) this.subscriptions = this.subscriptions.filter((s) => s !== sub);
    else {
      const list = this.exact.get(sub.subject)!.filter((s) => s !== sub);
      if (list.length > 0) this.exact.set(sub.subject, list);
      else this.exact.delete(sub.subject);
    }
  }

  /** Whether a route is kept for `subject` (only subjects checked valid get one). */
  known(subject: string): boolean {
    return this.routes.has(subject);
  }

  clear(): void {
    this.subscriptions = [];
    this.exact.clear();
    this.routes.clear();
  }

  /** Every plain subscription, plus one random member of each queue group. The list is not to be changed. */
  pick(subject: string): readonly MemorySubscription[] {
    const inbox = subject.startsWith('_INBOX.');
    let route = inbox ? undefined : this.routes.get(subject);
    if (!route) {
      route = this.routeOf(subject, inbox && this.wildcardsOnInboxes === 0);
      if (!inbox) {
        if (this.routes.size >= MAX_ROUTES) this.routes.clear();
        this.routes.set(subject, route);
      }
    }
    if (route.groups.length === 0) return route.plain;
    const picked = [...route.plain];
    for (const members of route.groups) picked.push(members[Math.floor(Math.random() * members.length)]);
    return picked;
  }

  /** A subscription came or went: the cached routes that may include it are stale. */
  private changed(sub: MemorySubscription, wildcard: boolean, delta: 1 | -1): void {
    if (!wildcard) {
      // An exact subscription is in one route only: its subject's (a connection's, an inbox's).
      this.routes.delete(sub.subject);
      return;
    }
    const first = sub.tokens[0];
    if (first === '*' || first === '>' || first === '_INBOX') this.wildcardsOnInboxes += delta;
    this.routes.clear();
  }

  /**
   * Who hears `subject` now (`exactOnly`: no wildcard subscription can match it). A reply to one
   * of this bus's inboxes usually has nobody (its waiter is elsewhere): that case allocates nothing.
   */
  private routeOf(subject: string, exactOnly: boolean): Route {
    const exact = this.exact.get(subject);
    if (exactOnly && !exact) return NOBODY;
    let candidates: MemorySubscription[] = [];
    if (!exactOnly) {
      const tokens = subject.split('.');
      candidates = this.subscriptions.filter((sub) => subjectMatches(sub.tokens, tokens));
    }
    if (exact) candidates.push(...exact);
    const plain: MemorySubscription[] = [];
    let groups: Map<string, MemorySubscription[]> | undefined;
    for (const sub of candidates) {
      if (sub.queue === undefined) plain.push(sub);
      else {
        groups ??= new Map();
        const members = groups.get(sub.queue);
        if (members) members.push(sub);
        else groups.set(sub.queue, [sub]);
      }
    }
    return { plain, groups: groups ? [...groups.values()] : [] };
  }
}
