import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `bytes` of randomness as base64url text (no padding). */
export function randomText(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

export function sha256Hex(text: string | Uint8Array): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Constant-time equality of two strings (compared through their SHA-256, so lengths leak nothing). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** A user auth token: 256 random bits, prefixed so it is recognisable in a leak scanner. */
export function newUserToken(): string {
  return `pier_${randomText(32)}`;
}

/**
 * App key and secret. bcrypt reads only 72 bytes of `app_key + timestamp + app_secret`, so the sizes
 * are chosen to fit with a 10-digit timestamp: 19 + 10 + 32 = 61 <= 72. The secret carries 192
 * random bits (docs/protocol.md "Identities" asks for at least 128).
 */
export function newAppKey(): string {
  return `ak_${randomText(12)}`;
}

export function newAppSecret(): string {
  return randomText(24);
}

/** How much of a token `tokenKey` keeps. */
const TOKEN_KEY_CHARS = 32;

/**
 * What a long token is looked up by in a map of tokens seen before: its last 32 characters (an
 * access token's end is its MAC; a user token's, its randomness). V8 hashes the whole of a string
 * used as a key, each time a string is seen first, at several nanoseconds a character: an access
 * token is some 400, a few per cent of a vault read. A map keyed so keeps the whole token beside
 * what it holds and compares it (`===`): two tokens that end alike only share a slot.
 */
export function tokenKey(token: string): string {
  return token.length > TOKEN_KEY_CHARS ? token.slice(-TOKEN_KEY_CHARS) : token;
}
