import { posix } from 'node:path';

/**
 * Upload folders of one user's apps must not nest (docs/protocol.md "Upload", amended 2026-11-23).
 *
 * Every app of a user writes under the same `<root>/<user>/`. An app whose `dest` encloses another
 * app's can replace the inner folder with a symlink and redirect that app's uploads; even where
 * the upload actor refuses the symlink, the outer app still reads, replaces and deletes the inner
 * app's files. So the registry refuses the pair at install unless the operator says the two apps
 * trust each other (`--shared-dest`): sharing becomes a decision, not an accident of two manifests.
 */

/** `/data//chat/` → `/data/chat`, `/./` → `/` (the manifest pattern already refused `..`). */
export function normalisedDest(dest: string): string {
  const n = posix.normalize(dest);
  return n.length > 1 ? n.replace(/\/$/, '') : n;
}

/** Whether `outer` is `inner` or one of its parent folders, compared by whole path segments. */
function encloses(outer: string, inner: string): boolean {
  return outer === inner || outer === '/' || inner.startsWith(`${outer}/`);
}

/** Equal, or one a path-segment prefix of the other: `/data` and `/data/chat` nest, `/data` and `/database` do not. */
export function destsNest(a: string, b: string): boolean {
  const x = normalisedDest(a);
  const y = normalisedDest(b);
  return encloses(x, y) || encloses(y, x);
}

/** An installed app of the same user and its upload folder (app's view). */
export interface DestHolder {
  app: string;
  dest: string;
}

export interface DestConflict {
  /** The installed app it clashes with; absent when `dest: /` is refused on its own. */
  other?: DestHolder;
  message: string;
}

const ASK = 'install with --shared-dest if the two apps trust each other';

/**
 * Why `app` with upload folder `dest` may not join `others` (the user's other apps with an upload
 * section), or null. `dest: /` is refused even alone: it encloses every app the user installs later.
 */
export function destConflict(app: string, dest: string, others: DestHolder[]): DestConflict | null {
  const mine = normalisedDest(dest);
  for (const o of others) {
    if (o.app === app) continue; // an app never conflicts with itself
    const theirs = normalisedDest(o.dest);
    if (!destsNest(mine, theirs)) continue;
    const message =
      mine === theirs
        ? `upload.dest "${mine}" of app "${app}" is also the upload.dest of app "${o.app}": ${ASK}`
        : encloses(mine, theirs)
          ? `upload.dest "${mine}" of app "${app}" encloses "${theirs}" of app "${o.app}": ${ASK}`
          : `upload.dest "${theirs}" of app "${o.app}" encloses "${mine}" of app "${app}": ${ASK}`;
    return { other: { app: o.app, dest: theirs }, message };
  }
  if (mine === '/') {
    return { message: `upload.dest "/" of app "${app}" encloses the user's whole folder, the folders of apps installed later included: install with --shared-dest if every app of this user may share it` };
  }
  return null;
}
