import { PierError } from '../../bus/errors.js';
import type { AppView } from '../../bus/subjects.js';
import type { VaultDeps } from './handler.js';
import { scopeOf, type VaultWriter } from './store.js';
import { destroyScope } from './versions-deleted.js';

// Purge (docs/vault.md "Purge"): a workspace destroyed at once, every env, everything kept of it.
// On JetStream a write's changes commit one by one, in the order it made them, so a purge removes
// the workspace's data keys first: cut short after that, it leaves only records nothing can open
// any more, and the hourly sweep finishes it (finishPurges). Then every removed record's earlier
// entries are erased from the streams, so not even the master key reads the workspace again.

const SEP = '\u0000';

/** Every key of a workspace, in every bucket and every env, starts with this. */
const workspacePrefix = (user: string, workspace: string) => `${user}${SEP}${workspace}${SEP}`;

/** Workspaces an app's manifest grants on this vault (from `<Op>?workspace=<ws>` ops). */
export function workspacesOf(app: AppView, group: string): Set<string> {
  const out = new Set<string>();
  for (const g of app.grants) {
    if (g.dataType !== 'secret' || g.group !== group) continue;
    for (const op of g.ops) out.add(op.slice(op.indexOf('=') + 1));
  }
  return out;
}

/**
 * `pier vault purge` and `uninstall --purge`: `user`'s `workspaces` go whole, in one write audited
 * by `audit` (once per workspace), and their bytes leave the streams before this answers. Answers
 * how many live secrets went.
 */
export async function purge(deps: VaultDeps, user: string, workspaces: readonly string[], audit: (w: VaultWriter, workspace: string) => void): Promise<number> {
  if (workspaces.length === 0) return 0;
  const live = await deps.store.write((w) => {
    for (const ws of workspaces) for (const scope of w.scopesOf(user, ws)) deps.keys.remove(scope, w);
    let n = 0;
    for (const ws of workspaces) {
      // Every env's records, with a key or without (a purge cut short earlier removed its keys):
      // destroyScope takes what lies under `<its argument>\0`, and a workspace is its scopes' prefix.
      n += destroyScope(w, `${user}${SEP}${ws}`);
      audit(w, ws);
    }
    return n;
  });
  try {
    for (const ws of workspaces) await deps.store.eraseRemoved?.(workspacePrefix(user, ws));
  } catch (err) {
    // Purged, not yet erased: said so, not as a failed purge. Purging again erases what is left
    // (the view remembers it), and so does the hourly sweep.
    throw new PierError('UNAVAILABLE', 'the workspace is purged, but not all of its earlier records could be erased from the streams yet: purge it again to finish now, or the hourly sweep will', { cause: err });
  }
  return live;
}

/** `uninstall --purge`: the removed app's workspaces go, unless another app of the user (`others`) still uses them. */
export async function purgeWorkspaces(deps: VaultDeps, removed: AppView, others: readonly AppView[]): Promise<void> {
  const stillUsed = new Set(others.flatMap((a) => [...workspacesOf(a, deps.vaultGroup)]));
  const doomed = [...workspacesOf(removed, deps.vaultGroup)].filter((ws) => !stillUsed.has(ws));
  await purge(deps, removed.user, doomed, (w, ws) => {
    deps.auditInWrite(w, { at: new Date(deps.now()).toISOString(), user: removed.user, app: removed.name, op: 'Purge', workspace: ws, env: null, name: null, outcome: 'ok' });
  });
}

/**
 * The sweep's half of a purge: secrets, versions and deleted secrets of a scope without a data key
 * are what a purge cut short after removing that key left (a create writes a scope's key before
 * its first record; nothing else removes a key), and nothing can open them. They are destroyed and
 * erased, audited as a `Purge` by `by`. Only where a write commits change by change (JetStream):
 * LMDB commits a purge whole. Answers how many scopes were finished.
 */
export async function finishPurges(deps: VaultDeps, by: string): Promise<number> {
  const { store } = deps;
  if (!store.syncWithStreams) return 0;
  const keyless = () => {
    const { secrets, versions, deleted } = store.everything();
    return [...new Set([...secrets, ...versions, ...deleted].map((r) => scopeOf(r.key)))].filter((scope) => !store.dataKey(scope));
  };
  if (keyless().length === 0) return 0;
  // Each bucket is followed on its own: a record just created may show before its scope's key,
  // written first. Caught up with where the streams end now, every key written before it shows.
  await store.syncWithStreams();
  const scopes = keyless();
  const finished = await store.write((w) => {
    const done: string[] = [];
    for (const scope of scopes) {
      if (w.dataKey(scope)) continue;
      destroyScope(w, scope);
      const [user, workspace, env] = scope.split(SEP);
      deps.auditInWrite(w, { at: new Date(deps.now()).toISOString(), user, app: by, op: 'Purge', workspace, env, name: null, outcome: 'ok' });
      done.push(scope);
    }
    return done;
  });
  for (const scope of finished) await store.eraseRemoved?.(`${scope}${SEP}`);
  return finished.length;
}
