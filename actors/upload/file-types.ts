import { extensions as mimeExtensions } from 'mime-types';

/**
 * `upload.fileType` of the manifest against an upload (docs/protocol.md "Upload", amended 2026-11-23):
 * case-insensitive, a leading dot ignored, `*` for any. With a list other than `*`, the file
 * name's extension is what decides, whatever type the client declares (`index.html` declared `pdf`
 * is refused), and a declared extension or MIME type must agree with the name. No content is
 * sniffed: an app that serves its uploads must still set their content type itself.
 *
 * MIME types are judged by the mime-db table (`mime-types`): a known type agrees with the
 * extensions it lists. Generic types (`application/octet-stream`, an unknown type) say nothing
 * about the name and are taken; so are the types browsers are known to send for a file of another
 * extension (Windows reports a `.csv` as `application/vnd.ms-excel`).
 */
const norm = (t: string) => t.trim().toLowerCase().replace(/^\./, '');

/** Types browsers send for files the mime-db table gives another type. */
const ALSO: Record<string, string[]> = {
  'application/vnd.ms-excel': ['csv'],
  'application/x-zip-compressed': ['zip'],
  'text/x-csv': ['csv'],
  'application/csv': ['csv'],
  'image/jpg': ['jpg', 'jpeg'],
  'image/x-png': ['png'],
};
const GENERIC = new Set(['application/octet-stream', 'binary/octet-stream', 'application/unknown']);

/** The extension of a path's last segment, without its dot (`report.PDF` → `pdf`); '' when it has none. */
export function extensionOf(path: string): string {
  const name = path.split('/').at(-1) ?? '';
  const dot = name.lastIndexOf('.');
  // As it is on disk: no trimming, and only ASCII letters folded (a Kelvin sign is not a K), so
  // `a.pdf ` or `d.\u212Aey` are not taken for `pdf` or `key`.
  return dot > 0 ? name.slice(dot + 1).replace(/[A-Z]/g, (c) => c.toLowerCase()) : '';
}

/** Why the upload's type is refused (a sentence naming the field), or null when it is allowed. */
export function typeRefusal(allowed: readonly string[], fileType: string, relativePath: string): string | null {
  if (allowed.some((a) => a.trim() === '*')) return null;
  const list = allowed.map(norm);
  const name = relativePath.split('/').at(-1) ?? '';
  const ext = extensionOf(relativePath);
  const declared = norm(fileType);
  const byExtension = declared !== '' && !declared.includes('/');
  if (byExtension && !list.includes(declared)) return `file_type: "${fileType}" is not allowed (allowed: ${allowed.join(', ')})`;
  if (ext === '' || !list.includes(ext)) {
    return byExtension
      ? `file_relative_path: the extension of "${name}" is not allowed, whatever file_type says (allowed: ${allowed.join(', ')})`
      : `file_type: "${fileType}" is not allowed for "${name}" (allowed: ${allowed.join(', ')})`;
  }
  if (declared === '' || declared === ext) return null;
  if (byExtension) return `file_type: "${fileType}" does not match the file name "${name}"`;
  const known = mimeExtensions[declared];
  if (GENERIC.has(declared) || known === undefined || known.includes(ext) || ALSO[declared]?.includes(ext)) return null;
  return `file_type: "${fileType}" does not match the file name "${name}"`;
}
