import type { Logger } from '../../lib/runtime/log.js';
import type { Metrics } from '../../lib/runtime/metrics.js';

/**
 * Wraps a uWebSockets.js callback so that a throw inside it (a bug, or an input nobody foresaw)
 * is logged, counted and handed to `recover` (answer 500, close 1011), and never reaches uWS:
 * an exception escaping a uWS callback takes the whole process down, with every connection on it.
 */
export function isolated<A extends unknown[]>(
  where: string,
  deps: { log: Logger; metrics: Metrics },
  handler: (...args: A) => void,
  recover: (...args: A) => void = () => undefined,
): (...args: A) => void {
  return (...args: A) => {
    try {
      handler(...args);
    } catch (err) {
      deps.metrics.handlerFailures.inc({ where });
      deps.log.error({ err, where }, 'handler failed');
      try {
        recover(...args);
      } catch (again) {
        deps.log.error({ err: again, where }, 'handler recovery failed');
      }
    }
  };
}
