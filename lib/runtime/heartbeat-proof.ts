import { processSubjects, type Heartbeat } from '../../bus/subjects.js';

/**
 * A heartbeat proves its role (docs/operations.md "How a window is proven", docs/security.md
 * "Presence, authenticated by role"). Its
 * subject shows only that the sender holds the role's bus identity, which a thief of the role's
 * `.nats.env` holds too, and its own signature only that one process made it. A heartbeat of this
 * release is signed a second time, over the same bytes, with the role's anchored key (derived from
 * the master key, or the role's key file): that one a thief lacks. A heartbeat so signed is
 * "proven", and only a proven one is believed where a claim would restrict others: that a process
 * speaks only older wire formats (no goodbye is sent while one lives), or that it shares no format
 * with this one (a mismatch the admin's /readyz fails on).
 *
 * What each process holds: the roles with an anchor (registry, token, provider, vault, callback,
 * admin) prove their heartbeats; an edge or upload process has no role key, so its heartbeats are
 * never proven. A 0.2 process never signs this way (its heartbeats have no `roleSig`).
 */
export interface RoleProof {
  /** `data` signed with `role`'s anchored Ed25519 key; null when this process does not hold it. */
  signAs(role: string, data: Uint8Array): Uint8Array | null;
  /** Whether `sig` over `data` is by an anchored key of `role` (either one during a master key rotation). */
  signedAs(role: string, data: Uint8Array, sig: Uint8Array): boolean;
  /** The role's anchored keys here; none for a role without an anchor, whose heartbeats nothing proves. */
  anchored(role: string): readonly string[];
}

/**
 * What a heartbeat's own signature (`sig`, by the process's key) covers: everything that decides
 * where messages and keys go, and which formats it speaks. 0.2 verifies these bytes as they are:
 * they never change (what a later release adds is signed in a field of its own).
 */
export function heartbeatSigned(role: string, b: Omit<Heartbeat, 'sig' | 'roleSig'>): Buffer {
  const fields: unknown[] = [role, b.id, b.busId, b.key, b.roleKeys, b.seq, b.signKey];
  if (b.wire !== undefined) fields.push(b.wire.speaks, b.wire.oldest);
  if (b.leaving === true) fields.push('leaving');
  return Buffer.from(JSON.stringify(fields));
}

/** What the role's signature covers: the same bytes after the subject, as a signed event's are (bus/sealed.ts), so nothing else the role signs reads as a heartbeat. */
const roleSigned = (role: string, b: Omit<Heartbeat, 'sig' | 'roleSig'>) => Buffer.concat([Buffer.from(`${processSubjects.heartbeat(role)}|`), heartbeatSigned(role, b)]);

/** The `roleSig` of this process's heartbeat for `role`; undefined when it holds no key of the role (edge, upload). */
export function roleSignature(proof: RoleProof | undefined, role: string, body: Omit<Heartbeat, 'sig' | 'roleSig'>): string | undefined {
  const sig = proof?.signAs(role, roleSigned(role, body));
  return sig ? Buffer.from(sig).toString('base64url') : undefined;
}

/**
 * Whether a heartbeat heard on `role`'s subject is proven. Without a proof at all (the in-process
 * bus, where nothing crosses a wire and no other process is heard) every heartbeat is believed, as
 * before there were proofs.
 */
export function isProven(proof: RoleProof | undefined, role: string, beat: Heartbeat): boolean {
  if (!proof) return true;
  if (beat.roleSig === undefined || proof.anchored(role).length === 0) return false;
  return proof.signedAs(role, roleSigned(role, beat), Buffer.from(beat.roleSig, 'base64url'));
}

/** Whether what a heartbeat of `role` claims may be believed unproven: only where nothing could prove it (a role without an anchor here). */
export const unprovable = (proof: RoleProof | undefined, role: string) => !proof || proof.anchored(role).length === 0;
