import { UploadTexts } from '../../bus/upload-texts.js';
import { createHash } from 'node:crypto';
import { createReadStream, lstatSync, readdirSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/**
 * The resumable upload's promises, checked from the history and the disk only (nothing of Pier is
 * imported; the folder layout is the documented one: a user's `/a/b` is `<root>/<user>/a/b`).
 *
 * What the workload writes (kind `upload`), and what each line means here:
 * - `info setup {user, app, dest}`: the user's upload folder, in the app's view.
 * - `info file {file, user, path, size, sha256}`: one file the workload means to upload to `path`.
 * - `post`, `patch`, `get` invocations carry `file` (and `uploadId`, `from`, `length` for a PATCH);
 *   outcomes carry `uploadId`, `offset` (the offset the server answered) and, for a PATCH, `complete`.
 *   A refused PATCH may carry `offset` too (`Invalid offset` answers the record); `message` is the
 *   server's.
 * - `info completed {file, uploadId, user, path, size, sha256, via}`: the server said the file is whole.
 *
 * The promises (docs/upload.md "Durability"): an offset in an answer is fsynced and never taken
 * back; a completed file is at its target, whole; a refused request changed nothing. An `unknown`
 * outcome may or may not have happened: a PATCH of unknown outcome may explain any offset within its
 * chunk, and may have completed the file, so such a file may be there or not, but whole if there.
 */

type Line = HistoryLine;

interface FileDecl {
  file: string;
  user: string;
  path: string;
  size: number;
  sha256: string;
}

/** One offset the server answered for an upload, with when it was asked (invoke) and answered. */
interface Report {
  uploadId: string;
  offset: number;
  askedN: number;
  answeredN: number;
  what: string;
}

const KIND = 'upload';
const USER = /^[a-z][a-z0-9-]{0,30}$/;

/** The host path of an app-view path under the user's folder, collapsed so it cannot climb out by text. */
export function hostPathOf(uploadRoot: string, user: string, appPath: string): string {
  if (!USER.test(user)) throw new Error(`not a user name: ${JSON.stringify(user)}`);
  return resolve(join(uploadRoot, user), `.${posix.normalize(`/${appPath}`)}`);
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** The history of the upload workload, indexed: invocations by id, files by name, offsets by upload. */
export function indexUploads(lines: readonly Line[]) {
  const mine = lines.filter((l) => l.kind === KIND);
  const invokes = new Map<string, Line>();
  for (const l of mine) if (l.phase === 'invoke') invokes.set(l.id, l);
  const outcomes = mine.filter((l) => l.phase === 'ok' || l.phase === 'fail' || l.phase === 'unknown');
  const files = new Map<string, FileDecl>();
  for (const l of mine) if (l.phase === 'info' && l.op === 'file') files.set(String(l.file), { file: String(l.file), user: String(l.user), path: String(l.path), size: Number(l.size), sha256: String(l.sha256) });
  const setups = mine.filter((l) => l.phase === 'info' && l.op === 'setup').map((l) => ({ user: String(l.user), dest: String(l.dest) }));

  const reports = new Map<string, Report[]>();
  /** PATCHes that may have written (ok or unknown), by upload: [from, from + length, invoked at]. */
  const writes = new Map<string, Array<{ from: number; to: number; n: number }>>();
  /** Uploads a PATCH may have completed, or an answer said complete (offset = size). */
  const mayBeComplete = new Set<string>();
  const invalidId: Array<{ uploadId: string; line: Line; inv: Line }> = [];
  // A PATCH that was not refused may have written its chunk, or a prefix of it (no outcome at all counts as unknown).
  const refused = new Set(outcomes.filter((l) => l.phase === 'fail').map((l) => l.id));
  for (const inv of invokes.values()) {
    if (inv.op !== 'patch' || refused.has(inv.id)) continue;
    const uploadId = String(inv.uploadId);
    const from = Number(inv.from);
    const to = from + Number(inv.length);
    writes.set(uploadId, [...(writes.get(uploadId) ?? []), { from, to, n: inv.n }]);
    if (to === files.get(String(inv.file))?.size) mayBeComplete.add(uploadId);
  }
  for (const out of outcomes) {
    const inv = invokes.get(out.id);
    if (!inv) continue;
    const file = files.get(String(inv.file));
    const uploadId = String(out.uploadId ?? inv.uploadId ?? '');
    if (out.phase === 'fail' && out.message === UploadTexts.INVALID_UPLOAD_ID) invalidId.push({ uploadId, line: out, inv });
    if (typeof out.offset === 'number' && uploadId && (out.phase === 'ok' || out.message === UploadTexts.INVALID_OFFSET)) {
      const list = reports.get(uploadId) ?? [];
      list.push({ uploadId, offset: out.offset, askedN: inv.n, answeredN: out.n, what: `${inv.op} ${out.phase} (line ${out.n})` });
      reports.set(uploadId, list);
      if (file && out.offset === file.size) mayBeComplete.add(uploadId);
    }
  }
  return { mine, invokes, outcomes, files, setups, reports, writes, mayBeComplete, invalidId };
}

type Index = ReturnType<typeof indexUploads>;

/** Completions the server acknowledged: the workload's `completed` lines, and any PATCH answered complete. */
function completions(ix: Index): Array<FileDecl & { uploadId: string; via: string; n: number }> {
  const out: Array<FileDecl & { uploadId: string; via: string; n: number }> = [];
  const seen = new Set<string>();
  for (const l of ix.mine) {
    if (l.phase !== 'info' || l.op !== 'completed') continue;
    out.push({ file: String(l.file), user: String(l.user), path: String(l.path), size: Number(l.size), sha256: String(l.sha256), uploadId: String(l.uploadId), via: String(l.via), n: l.n });
    seen.add(`${String(l.file)} ${String(l.uploadId)}`);
  }
  for (const l of ix.outcomes) {
    const inv = ix.invokes.get(l.id);
    if (l.phase !== 'ok' || inv?.op !== 'patch' || l.complete !== true) continue;
    const decl = ix.files.get(String(inv.file));
    if (!decl || seen.has(`${decl.file} ${String(l.uploadId)}`)) continue;
    out.push({ ...decl, uploadId: String(l.uploadId), via: 'patch (no completed line)', n: l.n });
  }
  return out;
}

/** Every completed upload's file is at its path under the user's folder, with its size and sha256. */
async function checkCompletedFiles(ix: Index, uploadRoot: string): Promise<Verdict> {
  const anomalies: string[] = [];
  const done = completions(ix);
  // The last completion of a path is what must be there (all are of one content, or check 3 says so).
  const byPath = new Map<string, (typeof done)[number]>();
  for (const c of done) byPath.set(`${c.user}:${c.path}`, c);
  for (const c of byPath.values()) {
    const where = hostPathOf(uploadRoot, c.user, c.path);
    const st = (() => {
      try {
        return lstatSync(where);
      } catch {
        return null;
      }
    })();
    if (!st) {
      anomalies.push(`${c.file} (${c.path}, upload ${c.uploadId}, completed via ${c.via} at line ${c.n}) is missing`);
      continue;
    }
    if (!st.isFile()) {
      anomalies.push(`${c.file} (${c.path}) is not a regular file`);
      continue;
    }
    if (st.size !== c.size) {
      anomalies.push(`${c.file} (${c.path}, upload ${c.uploadId}) has ${st.size} bytes, ${c.size} acknowledged`);
      continue;
    }
    const sha = await sha256Of(where);
    if (sha !== c.sha256) anomalies.push(`${c.file} (${c.path}, upload ${c.uploadId}) differs: sha256 ${sha.slice(0, 12)}…, ${c.sha256.slice(0, 12)}… uploaded`);
  }
  return { check: 'upload: every completed file is at its path, byte-identical', checked: byPath.size, anomalies };
}

/**
 * No acknowledged offset is taken back, and offsets move only by PATCHes that were not refused:
 * - an answer about an upload, asked after another answer about it was received, is not lower;
 * - an accepted PATCH answers exactly `from + length`;
 * - every offset above 0 lies within a PATCH (ok or unknown) of that upload invoked before it;
 * - an upload is never forgotten (`Invalid upload ID`) unless something may have completed it;
 * - a re-POST for a file answers the same upload, unless the previous one may have completed.
 */
function checkOffsets(ix: Index): Verdict {
  const anomalies: string[] = [];
  let checked = 0;
  for (const [uploadId, list] of ix.reports) {
    const byAnswer = [...list].sort((a, b) => a.answeredN - b.answeredN);
    for (const r of list) {
      checked++;
      const earlier = byAnswer.filter((a) => a.answeredN < r.askedN);
      const max = earlier.reduce<Report | null>((m, a) => (m === null || a.offset > m.offset ? a : m), null);
      if (max && r.offset < max.offset) anomalies.push(`upload ${uploadId}: ${r.what} answered offset ${r.offset} after ${max.what} had acknowledged ${max.offset}`);
      if (r.offset > 0 && !(ix.writes.get(uploadId) ?? []).some((w) => w.n < r.answeredN && r.offset > w.from && r.offset <= w.to)) {
        anomalies.push(`upload ${uploadId}: ${r.what} answered offset ${r.offset}, which no PATCH that was not refused could have written`);
      }
    }
  }
  for (const out of ix.outcomes) {
    const inv = ix.invokes.get(out.id);
    if (inv?.op !== 'patch' || out.phase !== 'ok') continue;
    const expected = Number(inv.from) + Number(inv.length);
    if (out.offset !== expected) anomalies.push(`upload ${String(inv.uploadId)}: PATCH at ${String(inv.from)} of ${String(inv.length)} bytes accepted with offset ${String(out.offset)} (line ${out.n}), not ${expected}`);
  }
  for (const { uploadId, line, inv } of ix.invalidId) {
    if (ix.mayBeComplete.has(uploadId)) continue;
    const acked = Math.max(0, ...(ix.reports.get(uploadId) ?? []).filter((r) => r.answeredN < inv.n).map((r) => r.offset));
    anomalies.push(`upload ${uploadId}: ${inv.op} answered "Invalid upload ID" (line ${line.n}) for an upload nothing completed (acknowledged to ${acked})`);
  }
  // Per file: the uploads its POSTs answered, in order.
  const postsByFile = new Map<string, Array<{ uploadId: string; askedN: number; answeredN: number; offset: number }>>();
  for (const out of ix.outcomes) {
    const inv = ix.invokes.get(out.id);
    if (inv?.op !== 'post' || out.phase !== 'ok' || typeof out.uploadId !== 'string') continue;
    const list = postsByFile.get(String(inv.file)) ?? [];
    list.push({ uploadId: out.uploadId, askedN: inv.n, answeredN: out.n, offset: Number(out.offset) });
    postsByFile.set(String(inv.file), list);
  }
  for (const [file, posts] of postsByFile) {
    for (const p of posts) {
      const before = posts.filter((q) => q.answeredN < p.askedN && q.uploadId !== p.uploadId && !ix.mayBeComplete.has(q.uploadId));
      for (const q of before) {
        const acked = Math.max(0, ...(ix.reports.get(q.uploadId) ?? []).filter((r) => r.answeredN < p.askedN).map((r) => r.offset));
        anomalies.push(`${file}: a re-POST answered a new upload ${p.uploadId} at offset ${p.offset} while upload ${q.uploadId} (acknowledged to ${acked}) was unfinished`);
      }
    }
  }
  return { check: 'upload: no acknowledged offset taken back, none from nowhere', checked, anomalies: [...new Set(anomalies)] };
}

/** No path is acknowledged complete twice with different contents (or sizes). */
function checkOneContent(ix: Index): Verdict {
  const anomalies: string[] = [];
  const byPath = new Map<string, Array<ReturnType<typeof completions>[number]>>();
  for (const c of completions(ix)) byPath.set(`${c.user}:${c.path}`, [...(byPath.get(`${c.user}:${c.path}`) ?? []), c]);
  for (const [path, list] of byPath) {
    const contents = new Set(list.map((c) => `${c.sha256}/${c.size}`));
    if (contents.size > 1) anomalies.push(`${path} completed ${list.length} times with ${contents.size} contents (uploads ${list.map((c) => c.uploadId).join(', ')})`);
    const declared = ix.files.get(list[0].file);
    if (declared && list.some((c) => c.sha256 !== declared.sha256 || c.size !== declared.size)) anomalies.push(`${path}: completed with other contents than the file declared`);
  }
  return { check: 'upload: no file completed twice with different contents', checked: byPath.size, anomalies };
}

/**
 * What is in the users' upload folders (outside the parts folder) is accounted for: a file of a
 * declared path that was never acknowledged complete is there only if a PATCH of unknown outcome may
 * have completed it, and then whole; no file is at a path nothing uploaded to.
 */
async function checkNoStrays(ix: Index, uploadRoot: string): Promise<Verdict> {
  const anomalies: string[] = [];
  const completed = new Set(completions(ix).map((c) => `${c.user}:${c.path}`));
  const declared = new Map<string, FileDecl>();
  for (const f of ix.files.values()) declared.set(hostPathOf(uploadRoot, f.user, f.path), f);
  const uploadsOf = new Map<string, Set<string>>();
  for (const out of ix.outcomes) {
    const inv = ix.invokes.get(out.id);
    if (inv && typeof out.uploadId === 'string') uploadsOf.set(String(inv.file), (uploadsOf.get(String(inv.file)) ?? new Set()).add(out.uploadId));
    if (inv?.op === 'patch' && typeof inv.uploadId === 'string') uploadsOf.set(String(inv.file), (uploadsOf.get(String(inv.file)) ?? new Set()).add(inv.uploadId));
  }
  let checked = 0;
  for (const { user, dest } of ix.setups) {
    const top = hostPathOf(uploadRoot, user, dest);
    let entries: string[];
    try {
      entries = (readdirSync(top, { recursive: true }) as string[]).map(String).sort();
    } catch {
      continue;
    }
    for (const rel of entries) {
      if (rel.split('/')[0] === '.pier-uploads') continue;
      const where = join(top, rel);
      if (!lstatSync(where).isFile()) continue;
      checked++;
      const f = declared.get(where);
      if (!f) {
        anomalies.push(`${relative(uploadRoot, where)}: a file no upload was declared for`);
        continue;
      }
      if (completed.has(`${f.user}:${f.path}`)) continue;
      const could = [...(uploadsOf.get(f.file) ?? [])].some((id) => ix.mayBeComplete.has(id));
      if (!could) anomalies.push(`${f.file} (${f.path}) is there though no PATCH could have completed it`);
      else if (lstatSync(where).size !== f.size || (await sha256Of(where)) !== f.sha256) anomalies.push(`${f.file} (${f.path}), of unknown completion, is there but not whole`);
    }
  }
  return { check: 'upload: files of unknown outcome absent or whole, no strays', checked, anomalies };
}

export async function checkUploads(lines: readonly Line[], context: { uploadRoot: string }): Promise<Verdict[]> {
  const ix = indexUploads(lines);
  return [await checkCompletedFiles(ix, context.uploadRoot), checkOffsets(ix), checkOneContent(ix), await checkNoStrays(ix, context.uploadRoot)];
}
