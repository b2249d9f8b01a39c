/**
 * Deepest JSON nesting Pier parses into a structure: deeper frames are forwarded raw (docs/protocol.md "Gateway"), deeper request bodies are refused (400).
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests arrays and objects deeper than `max`, found by one scan of the text
 * (brackets inside strings do not count). Checked before parsing: a structure 6,000 levels deep
 * parses, but every recursive step after it (encoders, validators, loggers) overflows the stack.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}
