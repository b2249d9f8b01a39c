// @ts-check
// How the views write numbers, times and errors.

/**
 * `1 upload`, `2 uploads`.
 * @param {number} n
 * @param {string} word
 */
export const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * How long ago an ISO time was, roughly: `42 s`, `5 min`, `3 h`, `2 d`.
 * @param {string} iso
 */
export const ago = (iso) => {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : s < 172800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
};

/**
 * An ISO time's day: `2025-05-01`.
 * @param {string} iso
 */
export const day = (iso) => iso.slice(0, 10);

/**
 * An ISO time to the second: `2025-05-01 12:34:56`.
 * @param {string} iso
 */
export const stamp = (iso) => iso.replace('T', ' ').slice(0, 19);

/**
 * Bytes in MiB, one decimal: `1.5`.
 * @param {number} bytes
 */
export const mib = (bytes) => (bytes / 1048576).toFixed(1);

/**
 * What went wrong, as shown to the operator.
 * @param {unknown} err
 */
export const messageOf = (err) => (err instanceof Error ? err.message : String(err));
