// @ts-check
// The Pier operator console: a sign-in, then one view per part of the running system, each
// refreshing itself. Preact + htm, no build step; everything it shows comes from the admin API.
import { h, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, resume, signIn, signOut, whenSignedOut } from './api.js';
import { messageOf } from './format.js';
import { field, html } from './html.js';
import { Apps } from './view-apps.js';
import { Audit } from './view-audit.js';
import { Charts } from './view-charts.js';
import { Connections } from './view-connections.js';
import { Processes } from './view-processes.js';
import { Providers } from './view-providers.js';
import { Secrets } from './view-secrets.js';
import { Uploads } from './view-uploads.js';
import { Users } from './view-users.js';

/** @typedef {{ id: string, title: string, component: import('preact').FunctionComponent }} View */

/**
 * The views in the navigation's order; `id` is the page's `#fragment`.
 * @type {[View, ...View[]]}
 */
const VIEWS = [
  { id: 'processes', title: 'Processes', component: Processes },
  { id: 'users', title: 'Users', component: Users },
  { id: 'apps', title: 'Apps', component: Apps },
  { id: 'providers', title: 'Providers', component: Providers },
  { id: 'connections', title: 'Connections', component: Connections },
  { id: 'uploads', title: 'Uploads', component: Uploads },
  { id: 'secrets', title: 'Secrets', component: Secrets },
  { id: 'audit', title: 'Vault audit', component: Audit },
  { id: 'charts', title: 'Charts', component: Charts },
];

/** @param {{ notice: string, onDone: () => void }} props */
function SignIn({ notice, onDone }) {
  const [error, setError] = useState(notice);
  const [busy, setBusy] = useState(false);
  /** @param {import('./html.js').FormSubmit} e */
  const submit = async (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    setBusy(true);
    setError('');
    try {
      await signIn(field(form, 'token'));
      form.reset();
      onDone();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'That is not the admin token.' : messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="signin">
    <h1>Pier console</h1>
    <form onSubmit=${submit} aria-describedby="signin-help">
      <label for="token">Admin token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      <p id="signin-help" class="help">The token in <code>PIER_ADMIN_TOKEN</code> (or <code>${'<data dir>/admin.token'}</code>). It is sent once; the console keeps a session cookie, not the token.</p>
      <button type="submit" disabled=${busy}>Sign in</button>
      ${error && html`<p role="alert" class="error">${error}</p>`}
    </form>
  </main>`;
}

/** The view the page's `#fragment` names, else the first. */
const viewOf = () => {
  const name = location.hash.replace(/^#/, '');
  return VIEWS.find((v) => v.id === name) ?? VIEWS[0];
};

/** @param {{ onSignOut: () => void }} props */
function Shell({ onSignOut }) {
  const [current, setCurrent] = useState(viewOf);
  useEffect(() => {
    const onHash = () => setCurrent(viewOf());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  return html`<div class="shell">
    <header>
      <span class="brand">Pier console</span>
      <nav aria-label="Views">
        <ul>
          ${VIEWS.map((v) => html`<li><a href=${`#${v.id}`} aria-current=${v === current ? 'page' : undefined}>${v.title}</a></li>`)}
        </ul>
      </nav>
      <button class="quiet" onClick=${onSignOut}>Sign out</button>
    </header>
    <main id="view" aria-labelledby="view-title">
      <h1 id="view-title">${current.title}</h1>
      <${current.component} />
    </main>
  </div>`;
}

/** @typedef {{ phase: 'checking' | 'in' | 'out', notice: string }} Phase */

function App() {
  const [state, setState] = useState(/** @type {Phase} */ ({ phase: 'checking', notice: '' }));
  useEffect(() => {
    whenSignedOut((notice) => setState({ phase: 'out', notice }));
    void resume().then((ok) => setState({ phase: ok ? 'in' : 'out', notice: '' }));
  }, []);
  if (state.phase === 'checking') return html`<p class="checking">Loading…</p>`;
  if (state.phase === 'out') return html`<${SignIn} notice=${state.notice} onDone=${() => setState({ phase: 'in', notice: '' })} />`;
  const out = async () => {
    await signOut();
    setState({ phase: 'out', notice: 'Signed out.' });
  };
  return html`<${Shell} onSignOut=${out} />`;
}

const root = document.getElementById('root');
if (root) render(h(App, null), root);
