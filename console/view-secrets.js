// @ts-check
// The vault's secrets, as the operator sees them: live and deleted, each one's versions; restore and
// undelete, confirmed. Never a value: no route this view calls answers one.
import { useEffect, useRef, useState } from 'preact/hooks';
import { get } from './api.js';
import { ErrorText, Table } from './components.js';
import { plural, stamp } from './format.js';
import { useNotice, usePoll } from './hooks.js';
import { field, html } from './html.js';

/**
 * @typedef {import('../edge/admin/api.js').SecretRow} SecretRow
 * @typedef {import('../edge/admin/api.js').DeletedSecretRow} DeletedSecretRow
 * @typedef {import('../edge/admin/api.js').SecretVersions} SecretVersions
 * @typedef {SecretVersions['versions'][number]} VersionRow
 * @typedef {import('../edge/admin/api.js').VaultTarget} VaultTarget
 * @typedef {typeof ENVS[number]} Env
 * @typedef {{ user: string, workspace: string, env: Env }} Target
 * @typedef {{ name: string, from: 'live' | 'deleted' }} Opened
 */

/** The vault's envs (docs/vault.md), `prod` the default. */
const ENVS = /** @type {const} */ (['test', 'dev', 'staging', 'prod']);
/** A workspace's name as the vault checks it (bus/subjects-vault.ts WORKSPACE_NAME); `\-` for the pattern attribute's `v` flag. */
const WORKSPACE = '[A-Za-z0-9_.\\-]{1,64}';
const WORKSPACE_NAME = new RegExp(`^${WORKSPACE}$`);

/** @param {string} v */
const envOf = (v) => ENVS.find((e) => e === v) ?? 'prod';

/**
 * The query of every vault route. The vault keeps `test` too, which VaultTarget (edge/admin/api.ts)
 * does not list: cast, so that the env chosen is the env asked.
 * @param {Target} t
 * @returns {VaultTarget}
 */
const targetQuery = (t) => ({ user: t.user, workspace: t.workspace, env: /** @type {VaultTarget['env']} */ (t.env) });

/** Where a secret is, as the confirmations and notices say it: `workspace chat of alice, prod`. @param {Target} t */
const where = (t) => `workspace ${t.workspace} of ${t.user}, ${t.env}`;

/** @param {number | null} bytes */
const size = (bytes) => (bytes === null ? 'unknown' : `${bytes} B`);

/**
 * One secret's versions, newest first: who wrote each and when, its size, whether its value is
 * kept; a kept earlier version of a live secret can be restored (confirmed). Never a value.
 * @param {{ target: Target, opened: Opened, changed: number, onChange: () => void, onClose: () => void }} props
 */
function Versions({ target, opened, changed, onChange, onClose }) {
  const { name } = opened;
  // Opened from the deleted list: the deleted copy's versions, even beside a live secret of the same name.
  const query = { ...targetQuery(target), name, ...(opened.from === 'deleted' ? { deleted: /** @type {'true'} */ ('true') } : {}) };
  const { data, error, refresh } = usePoll((signal) => get('vaultVersions', { query, signal }), 5000, [changed]);
  const [notice, act] = useNotice();
  const heading = useRef(/** @type {HTMLHeadingElement | null} */ (null));
  // Opened from a list further up: the operator (and a screen reader) is taken to it.
  useEffect(() => heading.current?.focus(), []);
  /** @param {VersionRow} v */
  const restore = (v) => {
    if (!data) return;
    const msg = `Restore version ${v.version} of ${name} (${where(target)})? Its value becomes version ${data.version + 1}, the current one; version ${data.version} is kept as an earlier version. Apps read the restored value from then on.`;
    if (!confirm(msg)) return;
    void act(async () => {
      const r = await get('vaultRestore', { query: { ...targetQuery(target), name }, body: { version: v.version } });
      refresh();
      onChange();
      return r;
    }, (r) => `Version ${r.restored} of ${r.name} restored: it is version ${r.version}, the current one.`);
  };
  const deleted = data?.deleted ?? null;
  /** @type {import('./components.js').TableProps<VersionRow>} */
  const table = {
    caption: `${plural(data?.versions.length ?? 0, 'version')}, newest first`,
    rows: data?.versions ?? [],
    rowKey: (v) => String(v.version),
    rowAttrs: (v) => ({ 'data-version': String(v.version) }),
    columns: [
      { title: 'Version', rowHeader: true, cell: (v) => v.version },
      { title: 'Written', cell: (v) => stamp(v.at) },
      { title: 'By', cell: (v) => v.by },
      { title: 'Size', cell: (v) => size(v.size) },
      { title: 'State', cell: (v) => (v.current ? 'current' : v.kept ? 'kept' : 'not kept'), cellClass: (v) => (v.current ? 'good' : v.kept ? '' : 'warn') },
      {
        title: 'Actions',
        srOnly: true,
        cell: (v) => (v.kept && !v.current && !deleted ? html`<button class="danger" onClick=${() => restore(v)} aria-label=${`Restore version ${v.version} of ${name}`}>Restore</button>` : null),
      },
    ],
  };
  return html`<section class="versions" aria-labelledby="versions-title">
    <h2 id="versions-title" tabIndex="-1" ref=${heading}>Versions of ${name}</h2>
    ${deleted && html`<p class="warn">Deleted ${stamp(deleted.at)} by ${deleted.by}; destroyed ${stamp(deleted.destroyAt)} unless undeleted. Undelete it to restore a version.</p>`}
    ${notice}<${ErrorText} text=${error} />
    <${Table} ...${table} />
    <button class="quiet" onClick=${onClose}>Close the versions</button>
  </section>`;
}

/**
 * The live and the deleted secrets of one workspace (names, versions, who and when, never a value),
 * undelete (confirmed), and the versions of the one opened.
 * @param {{ target: Target }} props
 */
function Workspace({ target }) {
  const { data, error, refresh } = usePoll(
    async (signal) => {
      const query = targetQuery(target);
      const [live, deleted] = await Promise.all([get('vaultList', { query, signal }), get('vaultDeleted', { query, signal })]);
      return { live, deleted };
    },
    5000,
  );
  const [opened, setOpened] = useState(/** @type {Opened | null} */ (null));
  /** Counts the changes made here: the versions shown are asked again after each. */
  const [changed, setChanged] = useState(0);
  const [notice, act] = useNotice();
  /** @param {DeletedSecretRow} d */
  const undelete = (d) => {
    if (!confirm(`Undelete ${d.name} (${where(target)})? It is live again at version ${d.version}, as it was when deleted, and the apps granted the workspace read it again.`)) return;
    void act(async () => {
      const r = await get('vaultUndelete', { query: { ...targetQuery(target), name: d.name } });
      refresh();
      setChanged((n) => n + 1);
      // Its versions, if open, are a live secret's now.
      setOpened((o) => (o?.name === d.name ? { name: d.name, from: 'live' } : o));
      return r;
    }, (r) => `${r.name} is live again at version ${r.version}.`);
  };
  /** @type {import('./components.js').TableProps<SecretRow>} */
  const live = {
    caption: `Live secrets (${data?.live.length ?? 0})`,
    rows: data?.live ?? [],
    rowKey: (s) => s.name,
    rowAttrs: (s) => ({ 'data-secret': s.name }),
    columns: [
      { title: 'Secret', rowHeader: true, cell: (s) => s.name },
      { title: 'Version', cell: (s) => s.version },
      { title: 'Updated', cell: (s) => stamp(s.updatedAt) },
      { title: 'By', cell: (s) => s.updatedBy },
      { title: 'Actions', srOnly: true, cell: (s) => html`<button onClick=${() => setOpened({ name: s.name, from: 'live' })} aria-label=${`Versions of ${s.name}`}>Versions</button>` },
    ],
  };
  /** @type {import('./components.js').TableProps<DeletedSecretRow>} */
  const deleted = {
    caption: `Deleted secrets (${data?.deleted.length ?? 0})`,
    rows: data?.deleted ?? [],
    rowKey: (d) => d.name,
    rowAttrs: (d) => ({ 'data-deleted': d.name }),
    columns: [
      { title: 'Secret', rowHeader: true, cell: (d) => d.name },
      { title: 'Version', cell: (d) => d.version },
      { title: 'Deleted', cell: (d) => stamp(d.deletedAt) },
      { title: 'By', cell: (d) => d.deletedBy },
      { title: 'Destroyed at', cell: (d) => stamp(d.destroyAt) },
      { title: 'Earlier versions kept', cell: (d) => d.versionsKept },
      {
        title: 'Actions',
        srOnly: true,
        cell: (d) =>
          html`<button onClick=${() => setOpened({ name: d.name, from: 'deleted' })} aria-label=${`Versions of deleted ${d.name}`}>Versions</button> <button onClick=${() => undelete(d)} aria-label=${`Undelete ${d.name}`}>Undelete</button>`,
      },
    ],
  };
  return html`${notice}<${ErrorText} text=${error} />
    <${Table} ...${live} />
    <${Table} ...${deleted} />
    ${opened && html`<${Versions} key=${opened.name} target=${target} opened=${opened} changed=${changed} onChange=${() => refresh()} onClose=${() => setOpened(null)} />`}`;
}

/**
 * How many values are still sealed with their data keys (every user's): a destroy erases those
 * only from the store, not from every copy, until `pier vault rekey` seals them anew under value
 * keys of their own (docs/vault.md "Destroyed").
 * @param {{ formats: import('../edge/admin/api.js').Rekeyed | undefined }} props
 */
function ValueFormats({ formats }) {
  if (!formats) return null;
  const old = formats.secrets.dataKeys + formats.versions.dataKeys;
  const keyed = formats.secrets.valueKeys + formats.versions.valueKeys;
  return html`<p class=${old > 0 ? 'warn' : 'help'} id="value-formats">
    ${keyed} value(s) under value keys of their own; ${formats.secrets.dataKeys} secret(s) and ${formats.versions.dataKeys} version(s) still under their data keys${old > 0 ? html` (<code>pier vault rekey</code> seals them anew)` : ''}.
    ${formats.sealingUnderValueKeys ? 'New values are sealed under value keys.' : 'New values are sealed with their data keys while a vault replica of an earlier release runs.'}
  </p>`;
}

/** Secrets: pick a user, a workspace and an env; its secrets, deleted ones and versions. */
export function Secrets() {
  const users = usePoll((signal) => get('userList', { signal }), 10_000);
  const formats = usePoll((signal) => get('vaultFormats', { signal }), 30_000);
  const [target, setTarget] = useState(/** @type {Target | null} */ (null));
  const [invalid, setInvalid] = useState('');
  /** @param {import('./html.js').FormSubmit} e */
  const choose = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const workspace = field(form, 'workspace').trim();
    // The form refuses it first; this keeps a name the vault would refuse out of the query.
    const bad = WORKSPACE_NAME.test(workspace) ? '' : 'A workspace is 1 to 64 characters: letters, digits, _ . or -';
    setInvalid(bad);
    if (!bad) setTarget({ user: field(form, 'user'), workspace, env: envOf(field(form, 'env')) });
  };
  return html`<form class="inline" onSubmit=${choose}>
      <label for="secrets-user">User</label>
      <select id="secrets-user" name="user" required>
        <option value="">Choose…</option>
        ${(users.data ?? []).map((u) => html`<option key=${u.name} value=${u.name}>${u.name}</option>`)}
      </select>
      <label for="secrets-workspace">Workspace</label>
      <input id="secrets-workspace" name="workspace" required pattern=${WORKSPACE} title="1 to 64 characters: letters, digits, _ . or -" spellcheck="false" autocomplete="off" />
      <label for="secrets-env">Env</label>
      <select id="secrets-env" name="env">${ENVS.map((e) => html`<option key=${e} value=${e} selected=${e === 'prod'}>${e}</option>`)}</select>
      <button type="submit">Show</button>
    </form>
    <${ErrorText} text=${invalid || users.error} />
    <p class="help">Names, versions, who wrote them and when. Values never appear here (<code>pier vault get</code> reads one, audited).</p>
    <${ValueFormats} formats=${formats.data} />
    ${target
      ? html`<p id="secrets-where">Workspace <strong>${target.workspace}</strong> of <strong>${target.user}</strong>, ${target.env}</p>
          <${Workspace} key=${`${target.user}/${target.workspace}/${target.env}`} target=${target} />`
      : html`<p>Choose a user and a workspace.</p>`}`;
}
