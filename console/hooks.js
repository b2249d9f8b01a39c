// @ts-check
// The hooks the views share: refreshing from the admin API, telling how an action went, drawing a chart.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from './html.js';
import { messageOf } from './format.js';

/**
 * @template T
 * @typedef {object} Poll
 * @property {T | null} data the last answer (kept while a later poll fails)
 * @property {string} error the last poll's failure, '' once one succeeds
 * @property {() => void} refresh polls now (after the one in flight, if any)
 */

/**
 * Calls `load` now and again `ms` after each answer while the component is shown; a failure is
 * shown, not thrown. One call at a time: a slow answer delays the next poll, and `refresh()` during
 * a call polls again once it is answered. Unmounting, or a change of `deps`, aborts the call in
 * flight (its signal is `fetch`'s) and starts over; an aborted call's answer is never shown.
 * @template T
 * @param {(signal: AbortSignal) => Promise<T>} load
 * @param {number} ms
 * @param {ReadonlyArray<unknown>} [deps]
 * @returns {Poll<T>}
 */
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState(/** @type {{ data: T | null, error: string }} */ ({ data: null, error: '' }));
  const latest = useRef(load);
  latest.current = load;
  const now = useRef(() => {});
  useEffect(() => {
    const stop = new AbortController();
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    let busy = false;
    let again = false;
    const poll = async () => {
      clearTimeout(timer);
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        const data = await latest.current(stop.signal);
        if (!stop.signal.aborted) setState({ data, error: '' });
      } catch (err) {
        if (!stop.signal.aborted) setState((s) => ({ ...s, error: messageOf(err) }));
      }
      busy = false;
      if (stop.signal.aborted) return;
      if (again) {
        again = false;
        void poll();
      } else {
        timer = setTimeout(poll, ms);
      }
    };
    now.current = () => void poll();
    void poll();
    return () => {
      stop.abort();
      clearTimeout(timer);
    };
  }, [ms, ...deps]);
  const refresh = useCallback(() => now.current(), []);
  return { ...state, refresh };
}

/**
 * Runs an action (`fn`) and says how it went: `done` of its result, or its failure.
 * @typedef {<R>(fn: () => Promise<R>, done: (result: R) => string) => Promise<void>} Act
 */

/**
 * A message after an action (read out by screen readers: `status`, or `alert` for a failure) and
 * the function that runs an action and sets it.
 * @returns {[import('preact').ComponentChildren, Act]}
 */
export function useNotice() {
  const [notice, setNotice] = useState({ text: '', error: false });
  /** @type {Act} */
  const act = async (fn, done) => {
    try {
      const result = await fn();
      setNotice({ text: done(result), error: false });
    } catch (err) {
      setNotice({ text: messageOf(err), error: true });
    }
  };
  const view = notice.text && html`<p role=${notice.error ? 'alert' : 'status'} class=${notice.error ? 'error' : 'ok'}>${notice.text}</p>`;
  return [view, act];
}

/**
 * uPlot's legend shows the values at the cursor, and `--` while the cursor is not over the chart:
 * then it shows the latest sample's instead. uPlot updates its legend (and fires `setLegend`) when
 * the chart is made, after each `setData`, and as the cursor moves or leaves; `cursor.idx` is null
 * while the cursor is not over the plot. (`false`: the hook is not fired again.)
 * @param {uPlot} u
 */
function legendAtLatest(u) {
  const last = u.data[0].length - 1;
  if (u.cursor.idx == null && last >= 0) u.setLegend({ idx: last }, false);
}

/**
 * A uPlot chart drawn into the element given the returned ref: made when the component mounts and
 * again whenever `deps` change (if the element is there then), given `data` whenever it changes
 * (`useMemo` it), as wide as its box (240 to 900 px) at every window resize. Its legend shows the
 * values under the cursor, or the latest sample's when the cursor is not over the chart.
 * @param {Omit<uPlot.Options, 'width'>} options read when the chart is made
 * @param {uPlot.AlignedData} data
 * @param {ReadonlyArray<unknown>} deps
 */
export function useUPlot(options, data, deps) {
  const box = useRef(/** @type {HTMLDivElement | null} */ (null));
  const plot = useRef(/** @type {uPlot | null} */ (null));
  const latest = useRef(data);
  latest.current = data;
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = () => Math.max(240, Math.min(el.clientWidth, 900));
    const hooks = { ...options.hooks, setLegend: [legendAtLatest, ...(options.hooks?.setLegend ?? [])] };
    const chart = new uPlot({ ...options, hooks, width: width() }, latest.current, el);
    plot.current = chart;
    const resize = () => chart.setSize({ width: width(), height: options.height });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      chart.destroy();
      plot.current = null;
    };
  }, deps);
  useEffect(() => plot.current?.setData(data), [data]);
  return box;
}
