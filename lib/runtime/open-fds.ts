import { readdir } from 'node:fs/promises';
import { Gauge, type Registry } from 'prom-client';

/**
 * `process_open_fds`, prom-client's default series (same name, help and meaning), without stalling
 * the event loop. prom-client counts `/proc/self/fd` with `readdirSync` at every collection: one
 * entry per open connection, measured 0.6 ms at 1,000 and 22-38 ms at 19,000 on this project's
 * machine, and every process is collected every 5 s for the console's history besides each scrape
 * (docs/operations.md "Console"). Here the folder is read in libuv's pool, at most once per
 * `refreshMs`; a collection in between answers the last count.
 */
export interface OpenFdsOptions {
  refreshMs?: number;
  now?: () => number;
  /** How many descriptors are open (the reader's own excluded). */
  count?: () => Promise<number>;
}

const countOpenFds = async () => (await readdir('/proc/self/fd')).length - 1;

export function replaceOpenFdsGauge(registry: Registry, options: OpenFdsOptions = {}): void {
  if (process.platform !== 'linux' || !registry.getSingleMetric('process_open_fds')) return;
  const { refreshMs = 30_000, now = Date.now, count = countOpenFds } = options;
  registry.removeSingleMetric('process_open_fds');
  let readAt = -Infinity;
  let reading: Promise<void> | null = null;
  new Gauge({
    name: 'process_open_fds',
    help: 'Number of open file descriptors.',
    registers: [registry],
    collect() {
      if (reading) return reading;
      if (now() - readAt < refreshMs) return undefined;
      readAt = now();
      reading = count()
        .then((n) => this.set(n), () => undefined)
        .finally(() => (reading = null));
      return reading;
    },
  });
}
