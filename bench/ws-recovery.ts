import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { round, summarise } from './load.js';

/**
 * What a recovery costs (docs/gateway.md "History and recovery"): a browser reconnecting with the
 * position it had, `missed` messages back, timed from its upgrade request to the last message of
 * its replay (the recovery frame, then the replay: the history read, a page at a time, and sent).
 * `count` recoveries one after another, each a new connection naming the same position; the
 * user's replay budget (16 MiB a minute by default) is far from spent by them.
 */
export async function recoveryCost(o: {
  port: number;
  local: string;
  host: string;
  token: string;
  headers: Record<string, string>;
  user: string;
  missed: number;
  payloadBytes: number;
  count: number;
}) {
  const send = async () => {
    const r = await fetch(`${o.local}/runtime/ws/conn/send`, { method: 'POST', headers: o.headers, body: JSON.stringify({ users: [o.user], payload: { event: 'news', data: 'x'.repeat(o.payloadBytes) } }) });
    const body = (await r.json()) as { data?: { kept?: boolean; offset?: number; epoch?: string } };
    if (!body.data?.kept) throw new Error(`recovery bench: a send was not kept (${JSON.stringify(body).slice(0, 200)})`);
    return body.data as { offset: number; epoch: string };
  };
  const from = await send();
  for (let i = 0; i < o.missed; i++) await send();
  const latencies: number[] = [];
  let errors = 0;
  for (let i = 0; i < o.count; i++) {
    const started = performance.now();
    const ok = await new Promise<boolean>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${o.port}/ws?recover=${from.epoch}:${from.offset}`, { headers: { host: o.host, 'x-authorization': o.token }, perMessageDeflate: false });
      let frames = 0;
      let settled = false;
      const done = (result: boolean) => {
        if (settled) return;
        settled = true;
        ws.terminate();
        resolve(result);
      };
      ws.on('message', (data) => {
        frames++;
        // The recovery frame says whether it recovered; then `missed` messages.
        if (frames === 1 && !String(data).includes('"recovered":true')) return done(false);
        if (frames === o.missed + 1) done(true);
      });
      ws.on('error', () => done(false));
      ws.on('close', () => done(false));
    });
    if (ok) latencies.push(performance.now() - started);
    else errors++;
  }
  const s = summarise(latencies, errors);
  return { recoveries: s.requests, errors: s.errors, missed: o.missed, replay_kib: round(((o.payloadBytes + 30) * o.missed) / 1024, 1), p50_ms: s.p50_ms, p99_ms: s.p99_ms };
}
