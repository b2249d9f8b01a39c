// @ts-check
// Every process answering on the bus, and whether each role runs somewhere.
import { get } from './api.js';
import { ErrorText, Table } from './components.js';
import { ago, plural } from './format.js';
import { usePoll } from './hooks.js';
import { html } from './html.js';

/** @typedef {import('../edge/admin/api.js').ReplicaRow} ReplicaRow */

/** An endpoint's faults since the process started; only a recent one (5 min) makes it look unwell. */
const RECENT_MS = 5 * 60_000;

/**
 * A fault (5xx) makes a process look unwell; a client's refusal (a missing secret's 404) does not.
 * A process older than `lastFault` says only `lastError`: taken as it is.
 * @param {ReplicaRow} p
 */
function health(p) {
  const faults = Object.values(p.endpoints ?? {}).map((e) => (e.lastFault === undefined ? e.lastError : e.lastFault));
  const recent = faults.flatMap((f) => (f && Date.now() - Date.parse(f.at) < RECENT_MS ? [f] : []));
  const last = recent.sort((a, b) => b.at.localeCompare(a.at))[0];
  if (!last) return html`<span class="good">answering</span>`;
  return html`<span class="warn" title=${`${last.code}: ${last.message}`}>answering; last error ${ago(last.at)} ago (${last.code})</span>`;
}

/** @type {import('./components.js').Column<ReplicaRow>[]} */
const COLUMNS = [
  { title: 'Process', rowHeader: true, cell: (p) => html`${p.id}<br/><small>pid ${p.pid}</small>` },
  { title: 'Roles', cell: (p) => p.roles.join(', ') },
  { title: 'Host', cell: (p) => p.host },
  { title: 'Version', cell: (p) => p.version ?? '?' },
  { title: 'Up', cell: (p) => ago(p.startedAt) },
  { title: 'Connections', cell: (p) => (p.roles.includes('edge') ? (p.counters?.connections ?? 0) : '–') },
  { title: 'Health', cell: health },
];

export function Processes() {
  const { data, error } = usePoll((signal) => get('status', { signal }), 2000);
  if (!data) return html`<${ErrorText} text=${error} />`;
  /** @type {import('./components.js').TableProps<ReplicaRow>} */
  const table = { caption: `Processes on the bus (${data.replicas.length})`, columns: COLUMNS, rows: data.replicas, rowKey: (p) => p.id, rowAttrs: (p) => ({ 'data-process': p.id }) };
  return html`<${ErrorText} text=${error} />
    <ul class="facts">
      <li>Bus: <strong>${data.bus.kind}</strong>, ${data.bus.connected ? 'connected' : html`<span class="bad">disconnected</span>`}</li>
      <li>Registry revision ${data.registry.revision}${data.registry.fresh ? '' : html` <span class="bad">(stale)</span>`}</li>
      <li>${plural(data.connections, 'WebSocket connection')}, ${plural(data.uploads, 'upload')} in progress</li>
      <li>${data.missingRoles.length === 0 ? 'Every role runs somewhere' : html`<span class="bad">No process runs: ${data.missingRoles.join(', ')}</span>`}</li>
      ${(data.mismatched ?? []).map(
        (m) =>
          html`<li class="bad" data-mismatch=${m.id}>Mismatch: ${m.roles.join(', ')} process ${m.id} (Pier ${m.version ?? 'older than 0.2'}) shares no wire format with this admin (it speaks ${m.wire.oldest}–${m.wire.speaks}, this admin ${data.wire.oldest}–${data.wire.speaks}): nothing is routed to it. Upgrade one release at a time.</li>`,
      )}
    </ul>
    <${Table} ...${table} />`;
}
