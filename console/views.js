// One component per view. Each refreshes on its own (usePoll) and calls only the admin API.
import { h } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { Charts } from './charts.js';

const html = htm.bind(h);

/** Calls `load` now and every `ms` while the view is shown; a failure is shown, not thrown. */
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ data: null, error: '', at: 0 });
  const run = useCallback(async () => {
    try {
      setState({ data: await load(), error: '', at: Date.now() });
    } catch (err) {
      setState((s) => ({ ...s, error: err.message }));
    }
  }, deps);
  useEffect(() => {
    run();
    const timer = setInterval(run, ms);
    return () => clearInterval(timer);
  }, [run]);
  return { ...state, refresh: run };
}

const get = async (path) => (await api('GET', path)).data;
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
/** An endpoint's error counts since the process started; only a recent one (5 min) makes it look unwell. */
const RECENT_MS = 5 * 60_000;
function health(p) {
  const recent = Object.values(p.endpoints ?? {}).filter((e) => e.lastError && Date.now() - Date.parse(e.lastError.at) < RECENT_MS);
  if (recent.length === 0) return html`<span class="good">answering</span>`;
  const last = recent.map((e) => e.lastError).sort((a, b) => b.at.localeCompare(a.at))[0];
  return html`<span class="warn" title=${`${last.code}: ${last.message}`}>answering; last error ${ago(last.at)} ago (${last.code})</span>`;
}
const Err = ({ text }) => text && html`<p role="alert" class="error">${text}</p>`;
const ago = (iso) => {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : s < 172800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
};

/** A message after an action, read out by screen readers. */
function useNotice() {
  const [notice, setNotice] = useState({ text: '', error: false });
  const act = async (fn, done) => {
    try {
      const r = await fn();
      setNotice({ text: done(r), error: false });
    } catch (err) {
      setNotice({ text: err.message, error: true });
    }
  };
  const view = notice.text && html`<p role=${notice.error ? 'alert' : 'status'} class=${notice.error ? 'error' : 'ok'}>${notice.text}</p>`;
  return [view, act];
}

function Processes() {
  const { data, error } = usePoll(() => get('/admin/v1/status'), 2000);
  if (!data) return html`<${Err} text=${error} />`;
  return html`<${Err} text=${error} />
    <ul class="facts">
      <li>Bus: <strong>${data.bus.kind}</strong>, ${data.bus.connected ? 'connected' : html`<span class="bad">disconnected</span>`}</li>
      <li>Registry revision ${data.registry.revision}${data.registry.fresh ? '' : html` <span class="bad">(stale)</span>`}</li>
      <li>${plural(data.connections, 'WebSocket connection')}, ${plural(data.uploads, 'upload')} in progress</li>
      <li>${data.missing_roles.length === 0 ? 'Every role runs somewhere' : html`<span class="bad">No process runs: ${data.missing_roles.join(', ')}</span>`}</li>
    </ul>
    <div class="scroll"><table>
      <caption>Processes on the bus (${data.replicas.length})</caption>
      <thead><tr><th scope="col">Process</th><th scope="col">Roles</th><th scope="col">Host</th><th scope="col">Version</th><th scope="col">Up</th><th scope="col">Connections</th><th scope="col">Health</th></tr></thead>
      <tbody>${data.replicas.map((p) => html`<tr data-process=${p.id}>
        <th scope="row">${p.id}<br/><small>pid ${p.pid}</small></th>
        <td>${p.roles.join(', ')}</td><td>${p.host}</td><td>${p.version ?? '?'}</td><td>${ago(p.startedAt)}</td>
        <td>${p.roles.includes('edge') ? (p.counters?.connections ?? 0) : '–'}</td>
        <td>${health(p)}</td>
      </tr>`)}</tbody>
    </table></div>`;
}

function Users() {
  const { data, error, refresh } = usePoll(() => get('/admin/v1/users'), 5000);
  const [created, setCreated] = useState(null);
  const [notice, act] = useNotice();
  const add = (e) => {
    e.preventDefault();
    const name = String(new FormData(e.target).get('name'));
    act(async () => {
      const r = await api('POST', '/admin/v1/users', { name });
      setCreated({ name, token: r.data.token });
      e.target.reset();
      refresh();
    }, () => `User ${name} added.`);
  };
  const issue = (name) =>
    act(async () => {
      const r = await api('POST', `/admin/v1/users/${encodeURIComponent(name)}/tokens`);
      setCreated({ name, token: r.data.token });
      refresh();
    }, () => `One more token issued for ${name}.`);
  const revoke = (name) => {
    if (!confirm(`Revoke every token of ${name}? Their browsers are signed out at once.`)) return;
    act(async () => {
      await api('POST', `/admin/v1/users/${encodeURIComponent(name)}/revoke`);
      refresh();
    }, () => `Every token of ${name} is revoked.`);
  };
  return html`<form class="inline" onSubmit=${add}>
      <label for="new-user">New user</label>
      <input id="new-user" name="name" required pattern="[a-z][a-z0-9\\-]{0,30}" title="lower-case letters, digits and dashes" />
      <button type="submit">Add user</button>
    </form>
    ${notice}
    ${created && html`<div class="once" role="status"><p>The token of <strong>${created.name}</strong>, shown this once:</p><output id="new-token">${created.token}</output><button class="quiet" onClick=${() => setCreated(null)}>I have kept it</button></div>`}
    <${Err} text=${error} />
    <div class="scroll"><table>
      <caption>Users (${data?.length ?? 0})</caption>
      <thead><tr><th scope="col">User</th><th scope="col">Since</th><th scope="col">Live tokens</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
      <tbody>${(data ?? []).map((u) => html`<tr data-user=${u.name}><th scope="row">${u.name}</th><td>${u.createdAt.slice(0, 10)}</td><td>${u.tokens}</td>
        <td><button onClick=${() => issue(u.name)} aria-label=${`Issue a token for ${u.name}`}>Issue token</button> <button class="danger" onClick=${() => revoke(u.name)} aria-label=${`Revoke the tokens of ${u.name}`}>Revoke</button></td></tr>`)}</tbody>
    </table></div>`;
}

function Apps() {
  const { data, error, refresh } = usePoll(() => get('/admin/v1/apps'), 5000);
  const [installed, setInstalled] = useState(null);
  const [notice, act] = useNotice();
  const install = (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const providers = String(f.get('providers') ?? '').trim();
    const body = { user: String(f.get('user')), manifest: String(f.get('manifest')), ...(providers ? { providers: [providers] } : {}) };
    act(async () => {
      const r = await api('POST', '/admin/v1/apps', body);
      setInstalled(r.data);
      e.target.reset();
      refresh();
    }, (r) => `Installed.`);
  };
  const uninstall = (a) => {
    if (!confirm(`Uninstall ${a.app} of ${a.user}? Its key stops working at once.`)) return;
    act(async () => {
      await api('DELETE', `/admin/v1/apps/${encodeURIComponent(a.user)}/${encodeURIComponent(a.app)}`);
      refresh();
    }, () => `${a.app} of ${a.user} uninstalled.`);
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
      ${installed.upload_dir && html`<p>Upload folder on the host: <code>${installed.upload_dir}</code></p>`}
      <button class="quiet" onClick=${() => setInstalled(null)}>I have kept it</button></div>`}
    <${Err} text=${error} />
    <div class="scroll"><table>
      <caption>Installed apps (${data?.length ?? 0})</caption>
      <thead><tr><th scope="col">App</th><th scope="col">User</th><th scope="col">Version</th><th scope="col">Grants</th><th scope="col">Upload folder</th><th scope="col">Providers</th><th scope="col">Installed</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
      <tbody>${(data ?? []).map((a) => html`<tr data-app=${`${a.user}/${a.app}`}><th scope="row">${a.app}${a.sharedDest ? html` <small>(shared dest)</small>` : ''}</th><td>${a.user}</td><td>${a.version}</td>
        <td>${(a.grants ?? []).map((g) => `${g.dataType}/${g.group}/${g.version}${g.ops?.length ? ` (${g.ops.join(', ')})` : ''}`).join('; ') || '–'}</td>
        <td>${a.upload_dest ? html`<code>${a.upload_dest}</code>` : '–'}</td><td>${a.providers.join(', ') || '–'}</td><td>${a.installedAt.slice(0, 10)}</td>
        <td><button class="danger" onClick=${() => uninstall(a)} aria-label=${`Uninstall ${a.app} of ${a.user}`}>Uninstall</button></td></tr>`)}</tbody>
    </table></div>`;
}

function Providers() {
  const { data, error, refresh } = usePoll(() => get('/admin/v1/providers'), 5000);
  const [notice, act] = useNotice();
  const set = (p, verb) => {
    if (verb === 'suspend' && !confirm(`Suspend ${p.name}? Calls to it are refused (404) until it is resumed.`)) return;
    return act(async () => {
    await api('POST', `/admin/v1/providers/${encodeURIComponent(p.name)}/${verb}`);
    refresh();
    }, () => `${p.name} ${verb === 'suspend' ? 'suspended' : 'resumed'}.`);
  };
  return html`${notice}<${Err} text=${error} />
    <div class="scroll"><table>
      <caption>Providers (${data?.length ?? 0})</caption>
      <thead><tr><th scope="col">Provider</th><th scope="col">App</th><th scope="col">Serves</th><th scope="col">State</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
      <tbody>${(data ?? []).map((p) => html`<tr data-provider=${p.name}><th scope="row">${p.name}</th><td>${p.user}/${p.app}</td><td>${p.dataType}/${p.group}/${p.version}</td>
        <td class=${p.state === 'active' ? 'good' : 'warn'}>${p.state}</td>
        <td>${p.state === 'active'
          ? html`<button onClick=${() => set(p, 'suspend')} aria-label=${`Suspend ${p.name}`}>Suspend</button>`
          : html`<button onClick=${() => set(p, 'resume')} aria-label=${`Resume ${p.name}`}>Resume</button>`}</td></tr>`)}</tbody>
    </table></div>`;
}

function Connections() {
  const [filter, setFilter] = useState({ user: '', app: '' });
  const query = new URLSearchParams(Object.entries(filter).filter(([, v]) => v)).toString();
  const { data, error, refresh } = usePoll(async () => api('GET', `/admin/v1/connections${query ? `?${query}` : ''}`), 2000, [query]);
  const [notice, act] = useNotice();
  const close = (a, c) => confirm(`Close connection ${c.id} of ${c.user} to ${a.app}? The browser sees close code 4001.`) && act(async () => {
    const r = await api('POST', '/admin/v1/connections/close', { user: a.user, app: a.app, conns: [c.id] });
    refresh();
    return r;
  }, (r) => (r.data.closed > 0 ? `Connection ${c.id} closed.` : `Connection ${c.id} was already gone.`));
  const apps = data?.data ?? [];
  const total = apps.reduce((n, a) => n + a.conns.length, 0);
  return html`<form class="inline" onSubmit=${(e) => { e.preventDefault(); const f = new FormData(e.target); setFilter({ user: String(f.get('user')), app: String(f.get('app')) }); }}>
      <label for="conn-user">User</label><input id="conn-user" name="user" />
      <label for="conn-app">App</label><input id="conn-app" name="app" />
      <button type="submit">Filter</button>
    </form>
    ${notice}<${Err} text=${error} />
    ${data?.partial && html`<p role="status" class="warn" id="partial">Partial: an edge did not answer; its connections are not listed.</p>`}
    <div class="scroll"><table>
      <caption>WebSocket connections (${total})</caption>
      <thead><tr><th scope="col">Connection</th><th scope="col">User</th><th scope="col">App</th><th scope="col">Edge</th><th scope="col">Client</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
      <tbody>${apps.flatMap((a) => a.conns.map((c) => html`<tr data-conn=${c.id}><th scope="row"><code>${c.id}</code></th><td>${c.user}</td><td>${a.app}</td><td>${c.process ?? c.edge ?? '?'}</td><td>${c.userAgent || '–'}</td>
        <td><button class="danger" onClick=${() => close(a, c)} aria-label=${`Close connection ${c.id}`}>Close</button></td></tr>`))}</tbody>
    </table></div>`;
}

function Uploads() {
  const { data, error } = usePoll(() => get('/admin/v1/uploads'), 1000);
  const uploads = data?.uploads ?? [];
  return html`<${Err} text=${error} />
    ${uploads.length === 0 && html`<p>No upload in progress.</p>`}
    <ul class="uploads">${uploads.map((u) => {
      const pct = u.size ? Math.floor((100 * u.offset) / u.size) : null;
      return html`<li data-upload=${u.id}>
        <label for=${`up-${u.id}`}><strong>${u.path}</strong> — ${u.user}/${u.app}, ${u.protocol === 'tus' ? 'tus' : 'upload API'}${u.writing ? ', receiving' : ', idle'}</label>
        <progress id=${`up-${u.id}`} max=${u.size ?? 1} value=${u.size ? u.offset : 0} aria-valuetext=${pct === null ? `${u.offset} bytes, length not declared yet` : `${pct} %`}></progress>
        <span>${(u.offset / 1048576).toFixed(1)} MiB${u.size ? ` of ${(u.size / 1048576).toFixed(1)} MiB (${pct} %)` : ''}</span>
      </li>`;
    })}</ul>
    ${data?.truncated && html`<p class="warn">Only the 200 most recent are shown.</p>`}`;
}

function Audit() {
  const [filter, setFilter] = useState({ user: '', app: '', op: '' });
  const query = new URLSearchParams({ limit: '200', ...Object.fromEntries(Object.entries(filter).filter(([, v]) => v)) }).toString();
  const { data, error } = usePoll(() => get(`/admin/v1/vault/audit?${query}`), 3000, [query]);
  return html`<form class="inline" onSubmit=${(e) => { e.preventDefault(); const f = new FormData(e.target); setFilter({ user: String(f.get('user')), app: String(f.get('app')), op: String(f.get('op')) }); }}>
      <label for="audit-user">User</label><input id="audit-user" name="user" />
      <label for="audit-app">App</label><input id="audit-app" name="app" />
      <label for="audit-op">Operation</label><input id="audit-op" name="op" list="audit-ops" />
      <datalist id="audit-ops"><option value="RetrieveSecret" /><option value="CreateSecret" /><option value="UpdateSecret" /><option value="DeleteSecret" /><option value="ListSecret" /></datalist>
      <button type="submit">Filter</button>
    </form>
    <${Err} text=${error} />
    <p class="help">Who did what to which secret. Values never appear here.</p>
    <div class="scroll"><table>
      <caption>Vault audit, newest first (${data?.length ?? 0})</caption>
      <thead><tr><th scope="col">When</th><th scope="col">User</th><th scope="col">App</th><th scope="col">Operation</th><th scope="col">Workspace</th><th scope="col">Secret</th><th scope="col">Outcome</th></tr></thead>
      <tbody>${(data ?? []).map((e) => html`<tr class="audit-entry"><td>${e.at.replace('T', ' ').slice(0, 19)}</td><td>${e.user ?? '–'}</td><td>${e.app ?? '–'}</td><td>${e.op}</td><td>${e.workspace}${e.env ? ` (${e.env})` : ''}</td><td>${e.name ?? '–'}</td>
        <td class=${e.outcome === 'ok' ? 'good' : 'warn'}>${e.outcome}</td></tr>`)}</tbody>
    </table></div>`;
}

export const VIEWS = [
  { id: 'processes', title: 'Processes', component: Processes },
  { id: 'users', title: 'Users', component: Users },
  { id: 'apps', title: 'Apps', component: Apps },
  { id: 'providers', title: 'Providers', component: Providers },
  { id: 'connections', title: 'Connections', component: Connections },
  { id: 'uploads', title: 'Uploads', component: Uploads },
  { id: 'audit', title: 'Vault audit', component: Audit },
  { id: 'charts', title: 'Charts', component: () => h(Charts, { usePoll, get }) },
];
