/**
 * Every subject of Pier, declared here and only here (one module per actor family). No other code
 * builds a subject string.
 */
export * from './subjects-registry.js';
export * from './subjects-registry-events.js';
export * from './subjects-process.js';
export * from './subjects-token.js';
export * from './subjects-provider.js';
export * from './subjects-vault.js';
export * from './subjects-gateway.js';
export * from './subjects-upload.js';
export * from './subjects-state.js';
export * from './subjects-stream.js';
export * from './subjects-history.js';
