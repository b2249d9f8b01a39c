// @ts-check
// Live charts of the cluster's figures, from the admin process's short history (the same figures
// as /metrics), drawn with uPlot. Each chart has a text summary for screen readers.
import { useMemo } from 'preact/hooks';
import { get } from './api.js';
import { ErrorText } from './components.js';
import { usePoll, useUPlot } from './hooks.js';
import { html } from './html.js';

/**
 * @typedef {import('../edge/admin/api.js').MetricsSample} MetricsSample
 * @typedef {import('uplot').AlignedData} AlignedData
 * @typedef {'httpRequestsPerSecond' | 'httpP99Ms' | 'wsMessagesPerSecond' | 'callbackRetriesPerSecond' | 'busRefusalsPerSecond'} Figure
 * @typedef {{ id: string, key: Figure, title: string, stroke: string }} Series
 */

/** The charts, one figure each; `id` names the chart in the page (`data-chart`). */
/** @type {Series[]} */
const SERIES = [
  { id: 'http_requests_per_s', key: 'httpRequestsPerSecond', title: 'HTTP requests / s', stroke: '#1f5fbf' },
  { id: 'http_p99_ms', key: 'httpP99Ms', title: 'HTTP p99 (ms)', stroke: '#b3261e' },
  { id: 'ws_messages_per_s', key: 'wsMessagesPerSecond', title: 'Gateway messages / s', stroke: '#2e7d32' },
  { id: 'callback_retries_per_s', key: 'callbackRetriesPerSecond', title: 'Callback retries / s', stroke: '#8a5a00' },
  { id: 'bus_refusals_per_s', key: 'busRefusalsPerSecond', title: 'Bus refusals / s', stroke: '#6a1b9a' },
];

/** @param {readonly MetricsSample[]} samples */
const times = (samples) => samples.map((s) => s.at / 1000);

/** @param {{ samples: readonly MetricsSample[], series: Series }} props */
function Chart({ samples, series }) {
  /** @type {AlignedData} */
  const data = useMemo(() => [times(samples), samples.map((s) => s[series.key])], [samples, series.key]);
  const box = useUPlot(
    { height: 160, series: [{}, { label: series.title, stroke: series.stroke, width: 2, spanGaps: false }], axes: [{}, { size: 50 }], legend: { show: false } },
    data,
    [series.key],
  );
  const last = samples.at(-1)?.[series.key];
  return html`<figure class="chart" data-chart=${series.id}>
    <figcaption>${series.title}: <strong>${last === undefined || last === null ? '–' : last}</strong></figcaption>
    <div ref=${box} role="img" aria-label=${`${series.title} over the last ${samples.length} samples, now ${last ?? 'none'}`}></div>
  </figure>`;
}

const ROUTE_COLOURS = ['#1f5fbf', '#b3261e', '#2e7d32', '#8a5a00', '#6a1b9a'];

/**
 * The five busiest routes over the whole history.
 * @param {readonly MetricsSample[]} samples
 */
function busiest(samples) {
  /** @type {Map<string, number>} */
  const totals = new Map();
  for (const s of samples) for (const [route, r] of Object.entries(s.routes ?? {})) totals.set(route, (totals.get(route) ?? 0) + r);
  return [...totals].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([route]) => route);
}

/**
 * Requests per second of the five busiest routes over the whole history, one line each.
 * @param {{ samples: readonly MetricsSample[] }} props
 */
function RoutesChart({ samples }) {
  const top = useMemo(() => busiest(samples), [samples]);
  const key = top.join('|');
  /** @type {AlignedData} */
  const data = useMemo(() => [times(samples), ...top.map((route) => samples.map((s) => s.routes?.[route] ?? 0))], [samples]);
  const box = useUPlot({ height: 200, series: [{}, ...top.map((route, i) => ({ label: route, stroke: ROUTE_COLOURS[i], width: 2 }))], axes: [{}, { size: 50 }] }, data, [key]);
  return html`<figure class="chart wide" data-chart="routes">
    <figcaption>HTTP requests / s by route (the five busiest)</figcaption>
    ${top.length === 0 ? html`<p>No request yet.</p>` : html`<div ref=${box} role="img" aria-label=${`Requests per second of ${top.join(', ')}`}></div>`}
  </figure>`;
}

export function Charts() {
  const { data, error } = usePoll((signal) => get('metricsHistory', { signal }), 2000);
  const samples = data?.samples ?? [];
  // Until the first answer, nothing: the history is kept from the admin process's start, so it
  // usually holds samples already ("Collecting" is for an admin process just started).
  const charts = !data
    ? ''
    : samples.length < 2
      ? html`<p>Collecting the first samples…</p>`
      : html`<div class="charts">${SERIES.map((s) => html`<${Chart} key=${s.id} samples=${samples} series=${s} />`)}<${RoutesChart} samples=${samples} /></div>`;
  return html`<${ErrorText} text=${error} />
    <p class="help">Sampled every ${data ? data.everyMs / 1000 : '–'} s since the admin process started; the last ${samples.length} samples. The same figures as <code>/metrics</code>, without the admin listener's own requests (this console's among them).</p>
    ${charts}`;
}
