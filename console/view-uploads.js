// @ts-check
// Unfinished uploads of both protocols, each with a progress bar.
import { get } from './api.js';
import { ErrorText } from './components.js';
import { mib } from './format.js';
import { usePoll } from './hooks.js';
import { html } from './html.js';

/** @typedef {import('../edge/admin/api.js').UploadRow} UploadRow */

/** @param {{ upload: UploadRow }} props */
function Upload({ upload: u }) {
  const pct = u.size ? Math.floor((100 * u.offset) / u.size) : null;
  return html`<li data-upload=${u.id}>
    <label for=${`up-${u.id}`}><strong>${u.path}</strong> — ${u.user}/${u.app}, ${u.protocol === 'tus' ? 'tus' : 'upload API'}${u.writing ? ', receiving' : ', idle'}</label>
    <progress id=${`up-${u.id}`} max=${u.size ?? 1} value=${u.size ? u.offset : 0} aria-valuetext=${pct === null ? `${u.offset} bytes, length not declared yet` : `${pct} %`}></progress>
    <span>${mib(u.offset)} MiB${u.size ? ` of ${mib(u.size)} MiB (${pct} %)` : ''}</span>
  </li>`;
}

export function Uploads() {
  const { data, error } = usePoll((signal) => get('uploads', { signal }), 1000);
  const uploads = data?.uploads ?? [];
  return html`<${ErrorText} text=${error} />
    ${uploads.length === 0 && html`<p>No upload in progress.</p>`}
    <ul class="uploads">${uploads.map((u) => html`<${Upload} key=${u.id} upload=${u} />`)}</ul>
    ${data?.truncated && html`<p class="warn">Only the 200 most recent are shown.</p>`}`;
}
