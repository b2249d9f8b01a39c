import type { Counter, Histogram } from 'prom-client';

/**
 * Hot-path series counted in plain numbers and handed to prom-client when it is read (the metric's
 * `collect`, which prom-client runs first at every scrape), not at each event. prom-client checks
 * and hashes the label object on every `inc` and `observe`, a series bound with `labels()` too, and
 * allocates for it: with the four series a vault read touches, 2-3 µs of CPU per read
 * (docs/performance.md "Vault reads"). A scrape reads the same figures: the tallies are folded in
 * before prom-client reads its own.
 *
 * A histogram's tally is folded into prom-client's record of the series (its `hashMap` entry, which
 * prom-client 15 keeps as `{labels, bucketValues, sum, count}`): the only way to add many
 * observations at once. Where that record is not found in that shape (another prom-client), each
 * observation goes to prom-client as it comes, as before: slower, never wrong
 * (test/unit/lib/metric-tally.test.ts says which path this prom-client takes).
 */
export class Tallies {
  private readonly folds: Array<() => void> = [];

  /** For the metric's `collect` option: folds every tally made here into prom-client. */
  readonly collect = (): void => {
    for (const fold of this.folds) fold();
  };

  /** `counter`'s series with these labels; the counter must be made with this object's `collect`. */
  counter<L extends string>(counter: Counter<L>, labels: Record<L, string>): { inc(): void } {
    let pending = 0;
    this.folds.push(() => {
      if (pending === 0) return;
      const n = pending;
      pending = 0;
      counter.inc(labels, n);
    });
    return {
      inc: () => {
        pending++;
      },
    };
  }

  /**
   * `histogram`'s series with these labels, whose `buckets` are the histogram's own (its upper
   * bounds, ascending); the histogram must be made with this object's `collect`.
   */
  histogram<L extends string>(histogram: Histogram<L>, labels: Record<L, string>, buckets: readonly number[]): { observe(v: number): void } {
    const record = seriesRecord(histogram, labels, buckets);
    if (!record) return { observe: (v) => histogram.observe(labels, v) };
    const counts = new Array<number>(buckets.length).fill(0);
    let count = 0;
    let sum = 0;
    this.folds.push(() => {
      if (count === 0) return;
      // prom-client's own record of the series, made again if it was reset since.
      const into = seriesRecord(histogram, labels, buckets)!;
      into.count += count;
      into.sum += sum;
      for (let i = 0; i < buckets.length; i++) into.bucketValues[buckets[i]] += counts[i];
      counts.fill(0);
      count = 0;
      sum = 0;
    });
    return {
      observe: (v) => {
        // What prom-client refuses, refused the same way, when it happens.
        if (!Number.isFinite(v)) throw new TypeError(`Value is not a valid number: ${v}`);
        count++;
        sum += v;
        // Above the last bound: in the count and sum only (the `+Inf` bucket is the count).
        for (let i = 0; i < buckets.length; i++) {
          if (v <= buckets[i]) {
            counts[i]++;
            return;
          }
        }
      },
    };
  }
}

/**
 * `counter`'s series by two label values, each made when first counted and then tallied (`Tallies.counter`):
 * no key made per count (a map per value of the first label). For hot paths whose labels take few
 * values, such as the vault's operations by op and outcome; past `maxSeries` series a new one is
 * counted straight into prom-client (right, only slower).
 */
export function pairCounter<A extends string, B extends string>(tallies: Tallies, counter: Counter<A | B>, first: A, second: B, maxSeries = 256): (a: string, b: string) => void {
  const series = new Map<string, Map<string, { inc(): void }>>();
  let made = 0;
  return (a, b) => {
    let byB = series.get(a);
    let s = byB?.get(b);
    if (!s) {
      const labels = { [first]: a, [second]: b } as Record<A | B, string>;
      if (made >= maxSeries) return counter.inc(labels);
      if (!byB) series.set(a, (byB = new Map()));
      byB.set(b, (s = tallies.counter(counter, labels)));
      made++;
    }
    s.inc();
  };
}

interface SeriesRecord {
  labels: Record<string, string>;
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

const sameLabels = (a: Record<string, string>, b: Record<string, string>) => Object.keys(b).every((k) => a[k] === b[k]) && Object.keys(a).length === Object.keys(b).length;

/** prom-client's record of one histogram series, made (at zero) when it has none; undefined when not of the known shape. */
function seriesRecord(histogram: Histogram<string>, labels: Record<string, string>, buckets: readonly number[]): SeriesRecord | undefined {
  const find = () => Object.values((histogram as unknown as { hashMap?: Record<string, SeriesRecord> }).hashMap ?? {}).find((r) => r && typeof r === 'object' && r.labels && sameLabels(r.labels, labels));
  let record = find();
  if (!record) {
    histogram.zero(labels);
    record = find();
  }
  if (!record || typeof record.sum !== 'number' || typeof record.count !== 'number' || typeof record.bucketValues !== 'object') return undefined;
  if (!buckets.every((b) => typeof record.bucketValues[b] === 'number')) return undefined;
  return record;
}
