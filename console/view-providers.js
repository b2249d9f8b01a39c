// @ts-check
// Providers: suspend one (confirmed) or resume it.
import { call, get } from './api.js';
import { ErrorText, Table } from './components.js';
import { useNotice, usePoll } from './hooks.js';
import { html } from './html.js';

/** @typedef {import('../edge/admin/api.js').ProviderRow} ProviderRow */

export function Providers() {
  const { data, error, refresh } = usePoll((signal) => get('providerList', { signal }), 5000);
  const [notice, act] = useNotice();
  /**
   * @param {ProviderRow} p
   * @param {'suspend' | 'resume'} verb
   */
  const set = (p, verb) => {
    if (verb === 'suspend' && !confirm(`Suspend ${p.name}? Calls to it are refused (404) until it is resumed.`)) return;
    void act(async () => {
      await call(verb === 'suspend' ? 'providerSuspend' : 'providerResume', { params: { name: p.name } });
      refresh();
    }, () => `${p.name} ${verb === 'suspend' ? 'suspended' : 'resumed'}.`);
  };
  /** @type {import('./components.js').TableProps<ProviderRow>} */
  const table = {
    caption: `Providers (${data?.length ?? 0})`,
    rows: data ?? [],
    rowKey: (p) => p.name,
    rowAttrs: (p) => ({ 'data-provider': p.name }),
    columns: [
      { title: 'Provider', rowHeader: true, cell: (p) => p.name },
      { title: 'App', cell: (p) => `${p.user}/${p.app}` },
      { title: 'Serves', cell: (p) => `${p.dataType}/${p.group}/${p.version}` },
      { title: 'State', cell: (p) => p.state, cellClass: (p) => (p.state === 'active' ? 'good' : 'warn') },
      {
        title: 'Actions',
        srOnly: true,
        cell: (p) =>
          p.state === 'active'
            ? html`<button onClick=${() => set(p, 'suspend')} aria-label=${`Suspend ${p.name}`}>Suspend</button>`
            : html`<button onClick=${() => set(p, 'resume')} aria-label=${`Resume ${p.name}`}>Resume</button>`,
      },
    ],
  };
  return html`${notice}<${ErrorText} text=${error} />
    <${Table} ...${table} />`;
}
