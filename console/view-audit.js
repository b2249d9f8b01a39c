// @ts-check
// The vault's audit, as the operator sees it: who did what to which secret, filtered by user, app
// and operation (its secrets are view-secrets.js). Never a value: no route this view calls answers one.
import { useState } from 'preact/hooks';
import { get } from './api.js';
import { ErrorText, Table } from './components.js';
import { stamp } from './format.js';
import { usePoll } from './hooks.js';
import { field, html } from './html.js';

/** @typedef {import('../edge/admin/api.js').AuditRow} AuditRow */

/** @type {import('./components.js').Column<AuditRow>[]} */
const COLUMNS = [
  { title: 'When', cell: (e) => stamp(e.at) },
  { title: 'User', cell: (e) => e.user ?? '–' },
  { title: 'App', cell: (e) => e.app ?? '–' },
  { title: 'Operation', cell: (e) => e.op },
  { title: 'Workspace', cell: (e) => `${e.workspace}${e.env ? ` (${e.env})` : ''}` },
  { title: 'Secret', cell: (e) => e.name ?? '–' },
  { title: 'Outcome', cell: (e) => e.outcome, cellClass: (e) => (e.outcome === 'ok' ? 'good' : 'warn') },
];

export function Audit() {
  const [filter, setFilter] = useState({ user: '', app: '', op: '' });
  const { data, error } = usePoll((signal) => get('vaultAudit', { query: { limit: '200', ...filter }, signal }), 3000, [filter.user, filter.app, filter.op]);
  /** @param {import('./html.js').FormSubmit} e */
  const filterBy = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    setFilter({ user: field(form, 'user'), app: field(form, 'app'), op: field(form, 'op') });
  };
  /** @type {import('./components.js').TableProps<AuditRow>} */
  const table = { caption: `Vault audit, newest first (${data?.length ?? 0})`, columns: COLUMNS, rows: data ?? [], rowAttrs: () => ({ class: 'audit-entry' }) };
  return html`<form class="inline" onSubmit=${filterBy}>
      <label for="audit-user">User</label><input id="audit-user" name="user" />
      <label for="audit-app">App</label><input id="audit-app" name="app" />
      <label for="audit-op">Operation</label><input id="audit-op" name="op" list="audit-ops" />
      <datalist id="audit-ops"><option value="RetrieveSecret" /><option value="CreateSecret" /><option value="UpdateSecret" /><option value="DeleteSecret" /><option value="ListSecret" /></datalist>
      <button type="submit">Filter</button>
    </form>
    <${ErrorText} text=${error} />
    <p class="help">Who did what to which secret. Values never appear here.</p>
    <${Table} ...${table} />`;
}
