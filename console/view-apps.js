// @ts-check
// Installed apps: install one from pasted documents (its environment shown once), uninstall.
import { useState } from 'preact/hooks';
import { call, get } from './api.js';
import { ErrorText, Table } from './components.js';
import { day } from './format.js';
import { useNotice, usePoll } from './hooks.js';
import { field, html } from './html.js';

/**
 * @typedef {import('../edge/admin/api.js').AppRow} AppRow
 * @typedef {import('../edge/admin/api.js').GrantRow} GrantRow
 * @typedef {import('../edge/admin/api.js').Installed} Installed
 * @typedef {import('../edge/admin/api.js').InstallRequest} InstallRequest
 */

/** @param {GrantRow} g */
const grant = (g) => `${g.dataType}/${g.group}/${g.version}${g.ops?.length ? ` (${g.ops.join(', ')})` : ''}`;

export function Apps() {
  const { data, error, refresh } = usePoll((signal) => get('appList', { signal }), 5000);
  /** An install's answer, with the app secret: shown until the operator says it is kept, and never again. */
  const [installed, setInstalled] = useState(/** @type {Installed | null} */ (null));
  const [notice, act] = useNotice();
  /** @param {import('./html.js').FormSubmit} e */
  const install = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const providers = field(form, 'providers').trim();
    /** @type {InstallRequest} */
    const body = { user: field(form, 'user'), manifest: field(form, 'manifest'), ...(providers ? { providers: [providers] } : {}) };
    void act(async () => {
      setInstalled(await get('appInstall', { body }));
      form.reset();
      refresh();
    }, () => 'Installed.');
  };
  /** @param {AppRow} a */
  const uninstall = (a) => {
    if (!confirm(`Uninstall ${a.app} of ${a.user}? Its key stops working at once.`)) return;
    void act(async () => {
      await call('appUninstall', { params: { user: a.user, app: a.app } });
      refresh();
    }, () => `${a.app} of ${a.user} uninstalled.`);
  };
  /** @type {import('./components.js').TableProps<AppRow>} */
  const table = {
    caption: `Installed apps (${data?.length ?? 0})`,
    rows: data ?? [],
    rowKey: (a) => `${a.user}/${a.app}`,
    rowAttrs: (a) => ({ 'data-app': `${a.user}/${a.app}` }),
    columns: [
      { title: 'App', rowHeader: true, cell: (a) => html`${a.app}${a.sharedDest ? html` <small>(shared dest)</small>` : ''}` },
      { title: 'User', cell: (a) => a.user },
      { title: 'Version', cell: (a) => a.version },
      { title: 'Grants', cell: (a) => (a.grants ?? []).map(grant).join('; ') || '–' },
      { title: 'Upload folder', cell: (a) => (a.uploadDest ? html`<code>${a.uploadDest}</code>` : '–') },
      { title: 'Providers', cell: (a) => a.providers.join(', ') || '–' },
      { title: 'Installed', cell: (a) => day(a.installedAt) },
      { title: 'Actions', srOnly: true, cell: (a) => html`<button class="danger" onClick=${() => uninstall(a)} aria-label=${`Uninstall ${a.app} of ${a.user}`}>Uninstall</button>` },
    ],
  };
  return html`<details class="panel"><summary>Install an app</summary>
      <form class="stack" onSubmit=${install}>
        <label for="app-user">For user</label><input id="app-user" name="user" required />
        <label for="app-manifest">PlatformManifest.yaml</label><textarea id="app-manifest" name="manifest" rows="8" required spellcheck="false"></textarea>
        <label for="app-providers">ProviderRegistry document (optional)</label><textarea id="app-providers" name="providers" rows="5" spellcheck="false"></textarea>
        <button type="submit">Install</button>
      </form></details>
    ${notice}
    ${installed && html`<div class="once" role="status"><p>${installed.app} installed for ${installed.user}. Its environment, with the app secret, shown this once:</p>
      <output id="installed-env">${Object.entries(installed.env ?? {}).map(([k, v]) => `${k}=${v}`).join('\n')}</output>
      ${installed.uploadDir && html`<p>Upload folder on the host: <code>${installed.uploadDir}</code></p>`}
      <button class="quiet" onClick=${() => setInstalled(null)}>I have kept it</button></div>`}
    <${ErrorText} text=${error} />
    <${Table} ...${table} />`;
}
