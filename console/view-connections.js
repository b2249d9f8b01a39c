// @ts-check
// WebSocket connections across every edge, filtered by user and app; close one (confirmed).
import { useState } from 'preact/hooks';
import { call, get } from './api.js';
import { ErrorText, Table } from './components.js';
import { useNotice, usePoll } from './hooks.js';
import { field, html } from './html.js';

/**
 * @typedef {import('../edge/admin/api.js').AppConnections} AppConnections
 * @typedef {import('../edge/admin/api.js').ConnectionRow} ConnectionRow
 * @typedef {{ a: AppConnections, c: ConnectionRow }} Row
 */

export function Connections() {
  const [filter, setFilter] = useState({ user: '', app: '' });
  // The whole envelope: `partial` sits beside `data`.
  const { data, error, refresh } = usePoll((signal) => call('connections', { query: filter, signal }), 2000, [filter.user, filter.app]);
  const [notice, act] = useNotice();
  /** @param {Row} row */
  const close = ({ a, c }) => {
    if (!confirm(`Close connection ${c.id} of ${c.user} to ${a.app}? The browser sees close code 4001.`)) return;
    void act(async () => {
      const r = await get('connectionsClose', { body: { user: a.user, app: a.app, conns: [c.id] } });
      refresh();
      return r;
    }, (r) => (r.closed > 0 ? `Connection ${c.id} closed.` : `Connection ${c.id} was already gone.`));
  };
  /** @param {import('./html.js').FormSubmit} e */
  const filterBy = (e) => {
    e.preventDefault();
    setFilter({ user: field(e.currentTarget, 'user'), app: field(e.currentTarget, 'app') });
  };
  /** @type {Row[]} */
  const rows = (data?.data ?? []).flatMap((a) => a.conns.map((c) => ({ a, c })));
  /** @type {import('./components.js').TableProps<Row>} */
  const table = {
    caption: `WebSocket connections (${rows.length})`,
    rows,
    rowKey: ({ c }) => c.id,
    rowAttrs: ({ c }) => ({ 'data-conn': c.id }),
    columns: [
      { title: 'Connection', rowHeader: true, cell: ({ c }) => html`<code>${c.id}</code>` },
      { title: 'User', cell: ({ c }) => c.user },
      { title: 'App', cell: ({ a }) => a.app },
      { title: 'Edge', cell: ({ c }) => c.process ?? c.edge ?? '?' },
      { title: 'Client', cell: ({ c }) => c.userAgent || '–' },
      { title: 'Actions', srOnly: true, cell: (row) => html`<button class="danger" onClick=${() => close(row)} aria-label=${`Close connection ${row.c.id}`}>Close</button>` },
    ],
  };
  return html`<form class="inline" onSubmit=${filterBy}>
      <label for="conn-user">User</label><input id="conn-user" name="user" />
      <label for="conn-app">App</label><input id="conn-app" name="app" />
      <button type="submit">Filter</button>
    </form>
    ${notice}<${ErrorText} text=${error} />
    ${data?.partial && html`<p role="status" class="warn" id="partial">Partial: an edge did not answer; its connections are not listed.</p>`}
    <${Table} ...${table} />`;
}
