/**
 * A setting that is wrong, named with what is wrong with it: `pier start` prints it and exits
 * (cli/outcome.ts). In a file of its own, importing nothing, so that every config module (and the
 * modules they read types from) can throw it without an import circle.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}
