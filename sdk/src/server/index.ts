/** Pier's SDK, server side (Node 20): `import { PierApp, callbackHandler } from '@pier/sdk/server'`. */
export { PierApp, type PierAppOptions } from './app.js';
export { AccessTokens, type AccessRequestBody, type AccessToken, type IssuedAccess, type Perm, type TokenOptions } from './tokens.js';
export { ProviderClient, type CallOptions, type ProviderSpec } from './provider.js';
export { VaultClient, type Secret, type SecretEnv, type VaultOptions } from './vault.js';
export { GatewayClient, type ConnectionInfo, type ConnectionList, type ListedUser, type SendReceipt, type SendTarget } from './gateway.js';
export { CallbackReceiver, callbackHandler, callbackKey, verifyCallback, type CallbackBody, type CallbackEvent, type ReceiverOptions, type VerifyOptions } from './callback.js';
export { traceHeaders, withTrace, type TraceContext } from './trace.js';
export * from '../errors.js';
