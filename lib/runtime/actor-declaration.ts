import { subjectPattern, type AnyLocated, type Located } from '../../bus/exchange.js';
import type { BusRole, Declaration, JetStreamDeclaration } from '../../bus/permissions.js';

/**
 * An actor is a declaration: what it serves and hears on the bus (its two tables of entries), what
 * it calls and emits, the JetStream state it owns. That is all its role's permissions derive from
 * (`busDeclarationOf`, cli/roles.ts): what a role may do on the bus is written once, in the actor's
 * `declaration.ts`. A declaration imports exchanges and nothing of the actor's implementation, so a
 * process reads every role's rights without loading any actor, and loads an actor's code only when
 * it starts its role (cli/roles.ts `lazyActor`; docs/operations.md "Start-up").
 *
 * An entry's exchange is declared in `bus/subjects-*.ts`, on its subject, or on one this process
 * builds from its bus id, `at(exchange, subjectOf)` (one replica's own: the events of the
 * connections it delivers). A request/reply exchange is served, a one-way one heard: an entry in the
 * other table is refused (`busDeclarationOf`, `startActor`).
 */
export interface ActorDeclaration {
  readonly role: BusRole;
  /** Request/reply entries (each handled by the implementation), or ones the actor's own code opens (`opens`). */
  readonly serves: Readonly<Record<string, AnyLocated | Opened>>;
  /** One-way entries: events every replica hears, or what is told to this replica's own subject. */
  readonly hears?: Readonly<Record<string, Located<unknown, never>>>;
  /** Exchanges it asks, and one-way ones it tells: on their subjects, or `at(exchange, subjectOf)` for any process's. */
  readonly calls?: ReadonlyArray<AnyLocated>;
  readonly emits?: ReadonlyArray<AnyLocated>;
  /** JetStream state it owns (PIER_STATE=jetstream), in the role's own account. */
  readonly jetstream?: JetStreamDeclaration;
}

/** An actor's declaration, its entries' names and exchanges kept in its type (the implementation is checked against them). */
export const declareActor = <D extends ActorDeclaration>(d: D): D => d;

/**
 * A request/reply exchange the actor's own code serves on subjects it opens at run time, one per
 * piece of work (a PATCH's write session, a byte stream), for as long as that work lasts: named on
 * the pattern those subjects match (a wildcard, or built from this replica's bus id). Not an entry
 * the starter subscribes for the actor's life: each such subject exists only while its work holds it
 * (a piece sent after that meets nobody, at once, rather than another's work), and keeps its own
 * order. Declared here so that the role's rights still come from the declaration alone.
 */
export interface Opened {
  readonly opens: AnyLocated;
}

export const opens = (exchange: AnyLocated): Opened => ({ opens: exchange });

export const isOpened = (e: AnyLocated | Opened): e is Opened => 'opens' in e;

/** A one-way exchange is heard, never served; a request/reply one served, never heard. */
export function checkTables(role: BusRole, serves: ReadonlyArray<[string, AnyLocated]>, hears: ReadonlyArray<[string, AnyLocated]>): void {
  for (const [name, exchange] of serves) {
    if (exchange.oneWay) throw new TypeError(`actor ${role}: serves.${name} is a one-way exchange: it belongs in hears`);
  }
  for (const [name, exchange] of hears) {
    if (!exchange.oneWay) throw new TypeError(`actor ${role}: hears.${name} is a request/reply exchange: it belongs in serves`);
  }
}

/**
 * The role's bus surface, for its permissions: every subject above, one built from a bus id as a
 * pattern over bus ids, each once (a stream's take and its pieces share their subjects' pattern).
 */
export function busDeclarationOf(d: ActorDeclaration): Declaration {
  const served = Object.entries(d.serves).map(([name, e]): [string, AnyLocated] => [name, isOpened(e) ? e.opens : e]);
  const heard = Object.entries(d.hears ?? {});
  checkTables(d.role, served, heard);
  const subjects = (xs: readonly AnyLocated[]) => [...new Set(xs.map(subjectPattern))];
  return {
    serves: subjects(served.map(([, exchange]) => exchange)),
    hears: subjects(heard.map(([, exchange]) => exchange)),
    calls: subjects(d.calls ?? []),
    emits: subjects(d.emits ?? []),
    ...(d.jetstream ? { jetstream: d.jetstream } : {}),
  };
}
