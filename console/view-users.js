// @ts-check
// Users: add one (its token shown once), issue one more token, revoke them all.
import { useState } from 'preact/hooks';
import { call, get } from './api.js';
import { ErrorText, Table } from './components.js';
import { day } from './format.js';
import { useNotice, usePoll } from './hooks.js';
import { field, html } from './html.js';

/** @typedef {import('../edge/admin/api.js').UserRow} UserRow */

export function Users() {
  const { data, error, refresh } = usePoll((signal) => get('userList', { signal }), 5000);
  /** A token just issued: shown until the operator says it is kept, and never again. */
  const [created, setCreated] = useState(/** @type {{ name: string, token: string } | null} */ (null));
  const [notice, act] = useNotice();
  /** @param {import('./html.js').FormSubmit} e */
  const add = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const name = field(form, 'name');
    void act(async () => {
      const r = await get('userAdd', { body: { name } });
      setCreated({ name, token: r.token });
      form.reset();
      refresh();
    }, () => `User ${name} added.`);
  };
  /** @param {string} name */
  const issue = (name) =>
    act(async () => {
      const r = await get('userToken', { params: { name } });
      setCreated({ name, token: r.token });
      refresh();
    }, () => `One more token issued for ${name}.`);
  /** @param {string} name */
  const revoke = (name) => {
    if (!confirm(`Revoke every token of ${name}? Their browsers are signed out at once.`)) return;
    void act(async () => {
      await call('userRevoke', { params: { name } });
      refresh();
    }, () => `Every token of ${name} is revoked.`);
  };
  /** @type {import('./components.js').TableProps<UserRow>} */
  const table = {
    caption: `Users (${data?.length ?? 0})`,
    rows: data ?? [],
    rowKey: (u) => u.name,
    rowAttrs: (u) => ({ 'data-user': u.name }),
    columns: [
      { title: 'User', rowHeader: true, cell: (u) => u.name },
      { title: 'Since', cell: (u) => day(u.createdAt) },
      { title: 'Live tokens', cell: (u) => u.tokens },
      {
        title: 'Actions',
        srOnly: true,
        cell: (u) =>
          html`<button onClick=${() => issue(u.name)} aria-label=${`Issue a token for ${u.name}`}>Issue token</button> <button class="danger" onClick=${() => revoke(u.name)} aria-label=${`Revoke the tokens of ${u.name}`}>Revoke</button>`,
      },
    ],
  };
  return html`<form class="inline" onSubmit=${add}>
      <label for="new-user">New user</label>
      <input id="new-user" name="name" required pattern="[a-z][a-z0-9\\-]{0,30}" title="1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes" />
      <button type="submit">Add user</button>
    </form>
    ${notice}
    ${created && html`<div class="once" role="status"><p>The token of <strong>${created.name}</strong>, shown this once:</p><output id="new-token">${created.token}</output><button class="quiet" onClick=${() => setCreated(null)}>I have kept it</button></div>`}
    <${ErrorText} text=${error} />
    <${Table} ...${table} />`;
}
