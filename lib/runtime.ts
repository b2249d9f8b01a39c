import type { Bus } from '../bus/bus.js';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';

/** What every role is started with. */
export interface RoleContext {
  bus: Bus;
  config: Config;
  log: Logger;
  metrics: Metrics;
}

/** A started role: stop it to release its subscriptions, listeners and files. */
export interface Running {
  stop(): Promise<void>;
}
