import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';
import type { Parsed } from './ws-history.js';

/**
 * The rolling upgrade's stricter rule for WebSockets (issue #41): a connection ends under its client
 * only while its own edge is being replaced (from the step's SIGTERM to the new process answering
 * /readyz: chaos/rolling.ts). Replacing an actor, the admin or the other edge closes none.
 *
 * Which edge held a client's connection is known from the app's callbacks (the conn id names the
 * edge's bus id, which the ws workload names). A client none of whose messages reached the app
 * has no known edge: its break is excused by any edge's replacement, and counted as unattributed.
 */
interface Window {
  target: string;
  from: number;
  to: number;
}

/** Each edge replacement's window, from the upgrade lines: `drain` to `ready` (or the history's end). */
function edgeWindows(lines: readonly HistoryLine[]): Window[] {
  const open = new Map<string, number>();
  const out: Window[] = [];
  const end = lines.length > 0 ? lines[lines.length - 1].t : 0;
  for (const l of lines) {
    if (l.kind !== 'upgrade' || l.roles !== 'edge') continue;
    const target = String(l.target);
    if (l.op === 'drain') open.set(target, l.t);
    else if (l.op === 'ready' || l.op === 'step end') {
      const from = open.get(target);
      if (from === undefined) continue;
      out.push({ target, from, to: l.t });
      open.delete(target);
    }
  }
  for (const [target, from] of open) out.push({ target, from, to: end });
  return out;
}

export function hasUpgrade(lines: readonly HistoryLine[]): boolean {
  return lines.some((l) => l.kind === 'upgrade' && l.op === 'step');
}

export function checkWsUpgrade(lines: readonly HistoryLine[], p: Parsed): Verdict[] {
  const windows = edgeWindows(lines);
  const edgeOfClient = new Map<string, string | undefined>();
  for (const c of p.conns.values()) for (const client of c.clients) edgeOfClient.set(client, p.edgeOf.get(c.connId.slice(0, c.connId.indexOf('.'))));
  const start = lines[0]?.t ?? 0;
  const at = (t: number) => `+${((t - start) / 1000).toFixed(1)} s`;
  const anomalies: string[] = [];
  let broken = 0;
  let own = 0;
  let unattributed = 0;
  for (const c of p.clients.values()) {
    if (c.brokenAt === undefined) continue;
    broken++;
    const t = c.brokenAt;
    const edge = edgeOfClient.get(c.client);
    const during = windows.filter((w) => w.from <= t && t <= w.to);
    if (edge !== undefined && during.some((w) => w.target === edge)) own++;
    else if (edge === undefined && during.length > 0) unattributed++;
    else anomalies.push(`${c.client} on ${edge ?? 'an unknown edge'}: closed under it (code ${c.endCode ?? '?'}) at ${at(t)} while ${during.length > 0 ? `only ${during.map((w) => w.target).join(', ')} was being replaced` : 'no edge was being replaced'}`);
  }
  return [
    { check: 'ws (upgrade): a connection closes under its client only while its own edge is replaced', checked: broken, anomalies },
    { check: `ws (upgrade): (info) closed during their edge's replacement: ${own}; edge unknown, during some edge's replacement: ${unattributed}`, checked: broken, anomalies: [] },
  ];
}
