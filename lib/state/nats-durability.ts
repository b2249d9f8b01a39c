/**
 * What an acknowledgement of JetStream means on the server Pier talks to (docs/operations.md "What
 * an acknowledgement means"): on disk only when nats-server is 2.10 or later with
 * `jetstream { sync_interval: always }`; otherwise in memory on the nodes, synced every 2 minutes,
 * and a power cut of every node loses what they acknowledged meanwhile. Told at start, in one line;
 * never a reason to refuse (an operator may accept it on a UPS).
 */
export interface DurabilityVerdict {
  ok: boolean;
  /** The one line, when not ok. */
  line?: string;
}

const DOCS = 'docs/operations.md "What an acknowledgement means"';

/** `[major, minor]` of a version string (`2.10.27`), or null. */
function versionOf(version: string | null): [number, number] | null {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/**
 * The server's version (from its INFO) and, when a monitor URL is set, its `/varz`: whether it
 * syncs before it acknowledges. `fetchVarz` answers the parsed `/varz` or throws.
 */
export async function judgeDurability(version: string | null, monitorUrl: string | null, fetchVarz: (url: string) => Promise<unknown>): Promise<DurabilityVerdict> {
  const v = versionOf(version);
  if (v && (v[0] < 2 || (v[0] === 2 && v[1] < 10))) {
    return { ok: false, line: `nats-server ${version} cannot sync before it acknowledges (sync_interval needs 2.10 or later): a power cut of every node can lose writes it acknowledged; upgrade nats-server and set jetstream { sync_interval: always } (${DOCS})` };
  }
  if (!monitorUrl) {
    return { ok: false, line: `cannot tell whether nats-server${version ? ` ${version}` : ''} syncs before it acknowledges: set PIER_NATS_MONITOR_URL to its monitoring endpoint (http://host:8222) to have it checked, and jetstream { sync_interval: always } in its configuration (${DOCS})` };
  }
  let varz: { jetstream?: { config?: { sync_always?: boolean; sync_interval?: number } } };
  try {
    varz = (await fetchVarz(`${monitorUrl}/varz`)) as typeof varz;
  } catch (err) {
    return { ok: false, line: `cannot tell whether nats-server syncs before it acknowledges: ${monitorUrl}/varz did not answer (${String((err as Error).message).slice(0, 120)}) (${DOCS})` };
  }
  const config = typeof varz === 'object' && varz !== null ? varz.jetstream?.config : undefined;
  if (typeof config !== 'object' || config === null) return { ok: false, line: `cannot tell whether nats-server syncs before it acknowledges: ${monitorUrl}/varz says nothing of JetStream (${DOCS})` };
  if (config.sync_always === true) return { ok: true };
  const every = typeof config.sync_interval === 'number' ? ` (it syncs every ${Math.round(config.sync_interval / 1e9)} s)` : '';
  return { ok: false, line: `nats-server does not sync before it acknowledges${every}: a power cut of every node can lose writes it acknowledged meanwhile; set jetstream { sync_interval: always } in its configuration (${DOCS})` };
}

/** `/varz` over HTTP, within 2 s. */
export async function fetchVarz(url: string): Promise<unknown> {
  const r = await fetch(url, { signal: AbortSignal.timeout(2_000) });
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  return r.json();
}
