// Live charts of the cluster's figures, from the admin process's short history (the same figures
// as /metrics), drawn with uPlot. Each chart has a text summary for screen readers.
import { h } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';

const html = htm.bind(h);

const SERIES = [
  { key: 'http_requests_per_s', title: 'HTTP requests / s', stroke: '#1f5fbf' },
  { key: 'http_p99_ms', title: 'HTTP p99 (ms)', stroke: '#b3261e' },
  { key: 'ws_messages_per_s', title: 'Gateway messages / s', stroke: '#2e7d32' },
  { key: 'callback_retries_per_s', title: 'Callback retries / s', stroke: '#8a5a00' },
  { key: 'bus_refusals_per_s', title: 'Bus refusals / s', stroke: '#6a1b9a' },
];

function Chart({ samples, series }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = [samples.map((s) => s.at / 1000), samples.map((s) => s[series.key])];
  useEffect(() => {
    const width = () => Math.max(240, Math.min(box.current.clientWidth, 900));
    plot.current = new uPlot(
      { width: width(), height: 160, series: [{}, { label: series.title, stroke: series.stroke, width: 2, spanGaps: false }], axes: [{}, { size: 50 }], legend: { show: false } },
      data,
      box.current,
    );
    const resize = () => plot.current.setSize({ width: width(), height: 160 });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      plot.current.destroy();
    };
  }, []);
  useEffect(() => plot.current?.setData(data), [samples]);
  const last = samples.at(-1)?.[series.key];
  return html`<figure class="chart" data-chart=${series.key}>
    <figcaption>${series.title}: <strong>${last === undefined || last === null ? '–' : last}</strong></figcaption>
    <div ref=${box} role="img" aria-label=${`${series.title} over the last ${samples.length} samples, now ${last ?? 'none'}`}></div>
  </figure>`;
}

const ROUTE_COLOURS = ['#1f5fbf', '#b3261e', '#2e7d32', '#8a5a00', '#6a1b9a'];

/** Requests per second of the five busiest routes over the whole history, one line each. */
function RoutesChart({ samples }) {
  const box = useRef(null);
  const plot = useRef(null);
  const totals = new Map();
  for (const s of samples) for (const [route, r] of Object.entries(s.routes ?? {})) totals.set(route, (totals.get(route) ?? 0) + r);
  const top = [...totals].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([route]) => route);
  const key = top.join('|');
  const data = [samples.map((s) => s.at / 1000), ...top.map((route) => samples.map((s) => s.routes?.[route] ?? 0))];
  useEffect(() => {
    if (top.length === 0) return undefined;
    const width = () => Math.max(240, Math.min(box.current.clientWidth, 900));
    plot.current = new uPlot(
      { width: width(), height: 200, series: [{}, ...top.map((route, i) => ({ label: route, stroke: ROUTE_COLOURS[i], width: 2 }))], axes: [{}, { size: 50 }] },
      data,
      box.current,
    );
    const resize = () => plot.current.setSize({ width: width(), height: 200 });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      plot.current.destroy();
      plot.current = null;
    };
  }, [key]);
  useEffect(() => plot.current?.setData(data), [samples]);
  return html`<figure class="chart wide" data-chart="routes">
    <figcaption>HTTP requests / s by route (the five busiest)</figcaption>
    ${top.length === 0 ? html`<p>No request yet.</p>` : html`<div ref=${box} role="img" aria-label=${`Requests per second of ${top.join(', ')}`}></div>`}
  </figure>`;
}

export function Charts({ usePoll, get }) {
  const { data, error } = usePoll(() => get('/admin/v1/metrics/history'), 2000);
  const samples = data?.samples ?? [];
  return html`${error && html`<p role="alert" class="error">${error}</p>`}
    <p class="help">Sampled every ${data ? data.every_ms / 1000 : '–'} s while someone is signed in; the last ${samples.length} samples. The same figures as <code>/metrics</code>.</p>
    ${samples.length < 2 ? html`<p>Collecting the first samples…</p>` : html`<div class="charts">${SERIES.map((s) => html`<${Chart} key=${s.key} samples=${samples} series=${s} />`)}<${RoutesChart} samples=${samples} /></div>`}`;
}
