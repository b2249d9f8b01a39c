// The Pier operator console: a sign-in, then one view per part of the running system, each
// refreshing itself. Preact + htm, no build step; everything it shows comes from the admin API.
import { h, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { resume, signIn, signOut, whenSignedOut } from './api.js';
import { VIEWS } from './views.js';

const html = htm.bind(h);

function SignIn({ notice, onDone }) {
  const [error, setError] = useState(notice ?? '');
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    const token = new FormData(e.target).get('token');
    try {
      await signIn(String(token));
      e.target.reset();
      onDone();
    } catch (err) {
      setError(err.status === 401 ? 'That is not the admin token.' : err.message);
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

const viewOf = () => {
  const name = location.hash.replace(/^#/, '');
  return VIEWS.some((v) => v.id === name) ? name : VIEWS[0].id;
};

function Shell({ onSignOut }) {
  const [view, setView] = useState(viewOf());
  useEffect(() => {
    const onHash = () => setView(viewOf());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const current = VIEWS.find((v) => v.id === view);
  return html`<div class="shell">
    <header>
      <span class="brand">Pier console</span>
      <nav aria-label="Views">
        <ul>
          ${VIEWS.map((v) => html`<li><a href=${`#${v.id}`} aria-current=${v.id === view ? 'page' : undefined}>${v.title}</a></li>`)}
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

function App() {
  const [state, setState] = useState({ phase: 'checking', notice: '' });
  useEffect(() => {
    whenSignedOut((notice) => setState({ phase: 'out', notice }));
    resume().then((ok) => setState({ phase: ok ? 'in' : 'out', notice: '' }));
  }, []);
  if (state.phase === 'checking') return html`<p class="checking">Loading…</p>`;
  if (state.phase === 'out') return html`<${SignIn} notice=${state.notice} onDone=${() => setState({ phase: 'in', notice: '' })} />`;
  return html`<${Shell} onSignOut=${async () => {
    await signOut();
    setState({ phase: 'out', notice: 'Signed out.' });
  }} />`;
}

/**
 * At phone width a table row is shown as a card (style.css): each cell needs its column's name,
 * copied here from the table's header whenever a view renders rows.
 */
function labelCells(root) {
  for (const table of root.querySelectorAll('table')) {
    const names = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll('tbody tr')) {
      [...row.children].forEach((cell, i) => {
        if (names[i] && cell.dataset.label !== names[i]) cell.dataset.label = names[i];
      });
    }
  }
}
const root = document.getElementById('root');
new MutationObserver(() => labelCells(root)).observe(root, { childList: true, subtree: true });

render(html`<${App} />`, root);
