/**
 * Compiled by `npm run build`, never run: the SDK's copies of Pier's wire types must equal Pier's
 * own. A field renamed, retyped, added or dropped on either side makes `tsc` fail here, naming the
 * pair. Shapes Pier builds without a named type are held to the parts that are named (see below).
 */
import type { UploadRecord as SdkUploadRecord } from '@pier/sdk/browser';
import type {
  AccessRequestBody as SdkAccessRequest,
  CallbackBody as SdkCallbackBody,
  ConnectionInfo as SdkConnectionInfo,
  IssuedAccess as SdkIssuedAccess,
  Perm as SdkPerm,
  SecretEnv as SdkSecretEnv,
} from '@pier/sdk/server';
import type { AccessRequest, GatewayAction, GatewayEvent, IssuedAccess, ListedConn, Perm, SecretEnv, UploadRecord } from '../../bus/subjects.js';

/** True only when A and B are the same type (optional and readonly modifiers included). */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

/**
 * The callback body as actors/callback/delivery.ts `callbackBody` writes it, from the event's
 * fields; `upload` is the upload-completed notice's action (actors/callback/upload-notices.ts).
 */
type PierCallbackBody = { data: GatewayEvent['data']; action: GatewayAction | 'upload'; user_name: GatewayEvent['user']; conn_id: GatewayEvent['connId'] };

export type WireChecks = [
  // POST /permission/v1alpha1/access: the body and the answer's data.
  Expect<Equals<SdkPerm, Perm>>,
  Expect<Equals<SdkAccessRequest, AccessRequest>>,
  Expect<Equals<SdkIssuedAccess, IssuedAccess>>,
  // The vault's env (its secrets' other fields are plain strings, built without a named type).
  Expect<Equals<SdkSecretEnv, SecretEnv>>,
  // GET /runtime/ws/conn/list: each connection is a ListedConn without its user (grouped by name).
  Expect<Equals<SdkConnectionInfo, Omit<ListedConn, 'user'>>>,
  // Callbacks to the app.
  Expect<Equals<SdkCallbackBody, PierCallbackBody>>,
  // POST, PATCH and GET /upload: the record in `data`.
  Expect<Equals<SdkUploadRecord, UploadRecord>>,
];
