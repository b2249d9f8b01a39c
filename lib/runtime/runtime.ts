import type { JetStreamClient, JetStreamManager } from 'nats';
import type { Bus } from '../../bus/bus.js';
import type { Config } from '../config/config.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { RegistryCache } from '../state/registry-cache.js';
import type { Peers } from './peers.js';

/** What every role is started with. */
export interface RoleContext {
  bus: Bus;
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** This process's read cache of the registry (started before any role). */
  cache: RegistryCache;
  /** Milliseconds since the epoch, with the configured offset: the only clock roles read. */
  now: () => number;
  /** Live Pier processes, from heartbeats. */
  peers: Peers;
  /** Live numbers a role reports to `pier status` (summed over processes), by name. */
  counters: Map<string, () => number>;
  /**
   * Ports Pier uses on this host (configured and bound listeners, NATS): provider calls never dial
   * them here. The edge adds the ports it bound (port 0 means "any free one").
   */
  ownPorts: Set<number>;
  /** JetStream on the process's NATS connection (null on the in-process bus). */
  jetstream: { js: JetStreamClient; manager: () => Promise<JetStreamManager> } | null;
  /** Listeners this process bound so far, by name (the install answer names the system listener's). */
  boundPorts: Partial<Config['ports']>;
}

/** A started role: stop it to release its subscriptions, listeners and files. */
export interface Running {
  stop(): Promise<void>;
}
