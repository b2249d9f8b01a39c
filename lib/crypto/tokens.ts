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
