/** Pier's SDK, browser side (no dependencies; also runs in Node 20): `import { connectGateway, upload } from '@pier/sdk/browser'`. */
export { connectGateway, GatewayConnection, GatewayQueueFullError, type CloseInfo, type GatewayEvents, type GatewayOptions, type GatewayPosition, type GatewayState, type RecoveryInfo, type WebSocketLike } from './gateway.js';
export { upload, uploadFolder, type FolderProgress, type UploadOptions, type UploadProgress, type UploadRecord } from './upload.js';
export * from '../errors.js';
