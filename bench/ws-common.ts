import type { ChildProcess } from 'node:child_process';
import WebSocket from 'ws';
import { measureUtilisation, summarise } from './load.js';
import { localLookup } from '../test/helpers/ws-client.js';

// What the WebSocket benchmarks share (ws.ts, ws-history.ts): clients, round trips, broadcast rates.

/** Kills a helper process and waits until it is gone. */
export function stopChild(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill('SIGKILL');
  });
}

/** `ca`: over wss:// (the host name in SNI, resolved here), the certificate checked against it. */
export function open(port: number, host: string, token: string, ca?: Buffer): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = ca
      ? new WebSocket(`wss://${host}:${port}/ws`, { ca, headers: { 'x-authorization': token }, perMessageDeflate: false, lookup: localLookup as never })
      : new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host, 'x-authorization': token }, perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    // Before open: the open fails; after: a reset connection is counted as lost, not a crash of the bench.
    ws.on('error', reject);
  });
}

export async function openMany(n: number, port: number, host: (i: number) => string, token: (i: number) => string, ca?: Buffer): Promise<WebSocket[]> {
  const out: WebSocket[] = [];
  for (let i = 0; i < n; i += 200) out.push(...(await Promise.all(Array.from({ length: Math.min(200, n - i) }, (_, k) => open(port, host(i + k), token(i + k), ca)))));
  return out;
}

export interface RoundTripOptions {
  /** Messages each connection sends a second (spread evenly over all connections). */
  perSecond?: number;
  /** The event name the app reads: `rt` is answered by conn_id, `rt-user` by `users` (ws-app.ts). */
  event?: 'rt' | 'rt-user';
}

/**
 * Round trips (browser → callback → app → send → browser): each connection sends `perSecond`
 * messages a second (1 by default), for 10 s after one second of warm-up.
 */
export async function roundTrips(conns: WebSocket[], options: RoundTripOptions = {}) {
  const perSecond = options.perSecond ?? 1;
  const event = options.event ?? 'rt';
  const latencies: number[] = [];
  const byTime: Array<[number, number]> = [];
  let lost = 0;
  const run = await measureUtilisation(async () => {
    const sent = new Map<string, number>();
    conns.forEach((ws) =>
      ws.on('message', (m) => {
        const id = String(m).replace(/"/g, '');
        const t0 = sent.get(id);
        if (t0 !== undefined) {
          const sec = Number(id.split('-')[0]);
          if (sec > 0) {
            latencies.push(performance.now() - t0);
            byTime.push([sec, performance.now() - t0]);
          }
          sent.delete(id);
        }
      }),
    );
    // Warm-up, not measured: one round trip on every connection, all answered, so the storm of
    // open callbacks that the connections caused is over before anything is timed.
    const warm = new Set(conns.map((_, i) => `w-${i}`));
    const warmed = new Promise<void>((resolve) => {
      const deadline = setTimeout(resolve, 60_000);
      conns.forEach((ws) =>
        ws.on('message', (m) => {
          warm.delete(String(m).replace(/"/g, ''));
          if (warm.size === 0) (clearTimeout(deadline), resolve());
        }),
      );
    });
    conns.forEach((ws, i) => ws.send(JSON.stringify({ event, data: `w-${i}` })));
    await warmed;
    // Second 0 is a warm-up too (JIT at the measured rate): sent, answered, not counted.
    const seconds = 11;
    const slots = conns.length * perSecond;
    for (let s = 0; s < seconds; s++) {
      for (let k = 0; k < perSecond; k++) {
        for (let i = 0; i < conns.length; i++) {
          setTimeout(() => {
            // One message a second per connection keeps the ids it always had (`<second>-<conn>`).
            const id = perSecond === 1 ? `${s}-${i}` : `${s}-${i}-${k}`;
            sent.set(id, performance.now());
            conns[i].send(JSON.stringify({ event, data: id }));
          }, s * 1000 + Math.floor(((k * conns.length + i) * 1000) / slots));
        }
      }
    }
    await new Promise((r) => setTimeout(r, seconds * 1000 + 2000));
    lost = sent.size;
  });
  const perSecondP99 = Array.from({ length: 10 }, (_, sec) => summarise(byTime.filter(([s]) => s === sec + 1).map(([, l]) => l), 0).p99_ms);
  const s = summarise(latencies, lost);
  return { samples: s.requests, lost, p50_ms: s.p50_ms, p99_ms: s.p99_ms, p99_ms_each_second: perSecondP99, goal_p99_ms: 5, client_event_loop_utilisation: run.loadgen_event_loop_utilisation };
}

/**
 * Messages a second the receivers got while `drive` ran for 5 s (and 0.5 s to drain), after 1 s of
 * warm-up that is not counted; the same for Pier and for its peer.
 */
export async function broadcastRate(receivers: { received(): Promise<number> }, drive: (ms: number) => Promise<unknown>) {
  await drive(1_000);
  await new Promise((r) => setTimeout(r, 500));
  const from = await receivers.received();
  const start = performance.now();
  const utilisation = await measureUtilisation(async () => {
    await drive(5_000);
    await new Promise((r) => setTimeout(r, 500));
  });
  return { rate: ((await receivers.received()) - from) / ((performance.now() - start) / 1000), utilisation };
}
