import { open, type Database, type RootDatabase } from 'lmdb';
import type { AuditEntry } from '../../bus/subjects.js';

/** A data key, wrapped (sealed) by the master key. One per (user, workspace, env). */
export interface DataKeyRecord {
  wrapped: Uint8Array;
  createdAt: string;
}

export interface SecretVersion {
  version: number;
  at: string;
  by: string;
}

/** A secret: its value sealed with its data key, and who wrote which version when (never a value). */
export interface SecretRecord {
  sealed: Uint8Array;
  version: number;
  createdAt: string;
  createdBy: string;
  updatedAt: string;
  updatedBy: string;
  /** Metadata of earlier versions, newest last. */
  history: SecretVersion[];
}

const SEP = '\u0000';

/** `user \0 workspace \0 env`: where a data key lives and the prefix of its secrets. */
export const scopeKey = (user: string, workspace: string, env: string) => [user, workspace, env].join(SEP);
export const secretKey = (scope: string, name: string) => `${scope}${SEP}${name}`;
export const nameOf = (key: string) => key.slice(key.lastIndexOf(SEP) + 1);

/**
 * The vault's LMDB environment (`<data>/vault`). Replicas on one host share it: LMDB serialises
 * their write transactions, so "create if absent" and check-and-set hold across replicas.
 */
export class VaultStore {
  private constructor(
    readonly root: RootDatabase,
    readonly dataKeys: Database<DataKeyRecord, string>,
    readonly secrets: Database<SecretRecord, string>,
    readonly audit: Database<AuditEntry, [number, string, number]>,
  ) {}

  static open(path: string): VaultStore {
    const root = open({ path, compression: false });
    return new VaultStore(
      root,
      root.openDB<DataKeyRecord, string>({ name: 'data-keys' }),
      root.openDB<SecretRecord, string>({ name: 'secrets' }),
      root.openDB<AuditEntry, [number, string, number]>({ name: 'audit' }),
    );
  }

  /** Secrets of one scope, sorted by name (LMDB keeps keys sorted). */
  listScope(scope: string): Array<{ key: string; value: SecretRecord }> {
    return [...this.secrets.getRange({ start: `${scope}${SEP}`, end: `${scope}${SEP}\uffff` })];
  }

  /** All scopes of a (user, workspace), whatever the env. */
  scopesOf(user: string, workspace: string): string[] {
    const prefix = `${user}${SEP}${workspace}${SEP}`;
    return [...this.dataKeys.getKeys({ start: prefix, end: `${prefix}\uffff` })];
  }

  /** Newest first, at most `limit`, optionally one user's. */
  readAudit(limit: number, user?: string): AuditEntry[] {
    const out: AuditEntry[] = [];
    for (const { value } of this.audit.getRange({ reverse: true })) {
      if (user !== undefined && value.user !== user) continue;
      out.push(value);
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * Retention: removes audit entries older than `before` (ms), then the oldest until at most
   * `maxEntries` remain. Deletes in transactions of a bounded size so a large backlog never holds
   * one huge write. Answers how many went.
   */
  async pruneAudit(before: number, maxEntries: number): Promise<number> {
    let removed = 0;
    for (;;) {
      const old = [...this.audit.getKeys({ end: [before], limit: 10_000 })];
      if (old.length === 0) break;
      await this.root.transaction(() => old.forEach((k) => this.audit.remove(k)));
      removed += old.length;
    }
    const excess = this.audit.getCount() - maxEntries;
    for (let left = excess; left > 0; ) {
      const oldest = [...this.audit.getKeys({ limit: Math.min(left, 10_000) })];
      if (oldest.length === 0) break;
      await this.root.transaction(() => oldest.forEach((k) => this.audit.remove(k)));
      removed += oldest.length;
      left -= oldest.length;
    }
    return removed;
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
