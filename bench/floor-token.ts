import { createHmac } from 'node:crypto';

/** The MAC of an access token's payload, as Pier makes them (HMAC-SHA256, base64url). */
export const accessMac = (macKey: Buffer, payload: string) => createHmac('sha256', macKey).update(payload).digest('base64url');

/** An access token the vault floor (floor-vault.ts) accepts for `macKey`. */
export function floorAccessToken(macKey: Buffer): string {
  const payload = Buffer.from(JSON.stringify({ app: 'alice/chat', ops: ['RetrieveSecret'] })).toString('base64url');
  return `pat1.${payload}.${accessMac(macKey, payload)}`;
}
