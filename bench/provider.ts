import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { Pool } from 'undici';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { providerDoc } from '../test/helpers/provider-server.js';
import { startChild } from './children.js';
import type { ChildProcess } from 'node:child_process';
import { fixedRate, maxRate, measureUtilisation, round, type LatencySummary, type Target } from './load.js';
import { cpuPerOp, ratioAtLeast, ratioAtMost } from './goals.js';
import { nginxMissing, startNginx } from './nginx.js';
import { pinServer, SERVER_NODE_FLAGS } from './pinning.js';
import { otlpSink } from './tracing.js';

const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };


/**
 * The edge process's event-loop delay p99 since the previous scrape, in ms. prom-client samples
 * with a 10 ms timer and reports the whole interval (an idle loop reads about 10 ms), so the
 * timer's own 10 ms are taken off.
 */
const SAMPLING_MS = 10;
async function eventLoopP99(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('nodejs_eventloop_lag_p99_seconds'));
  return Math.max(0, Number(line?.split(' ').at(-1)) * 1000 - SAMPLING_MS);
}

/**
 * A pass-through in front of the same upstream (the floor, or nginx), measured as Pier is: 1,000
 * rps for 5 s (latency added to the direct call's), then 64 clients back to back with its CPU per call.
 */
async function passThrough(started: Promise<{ port: number; proc: ChildProcess; stop(): unknown }>, direct: Target, directFixed: LatencySummary) {
  const proxy = await started;
  try {
    const via: Target = { ...direct, origin: `http://127.0.0.1:${proxy.port}` };
    await fixedRate(via, 500, 2); // warm-up
    const fixed = await fixedRate(via, 1000, 5);
    const max = await cpuPerOp(proxy.proc.pid!, () => maxRate(via, 64, 5), (r) => r.requests);
    const added = (k: 'p50_ms' | 'p90_ms' | 'p99_ms') => round(fixed[k] - directFixed[k]);
    return {
      fixed_rate_1000_rps_1KiB: fixed,
      added_ms: { p50: added('p50_ms'), p90: added('p90_ms'), p99: added('p99_ms') },
      max_rate_rps: max.result.rps,
      max_rate_p99_ms: max.result.p99_ms,
      errors: fixed.errors + max.result.errors,
      cpu_us_per_call: max.cpu_us_per_op,
    };
  } finally {
    await proxy.stop();
  }
}

/** The notes provider and the chat app calling it, installed for alice; the targets direct and through Pier. */
async function installNotes(pier: PierProcess, dir: string, upstreamPort: number) {
  mkdirSync(dir, { recursive: true });
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  await cli(['user', 'add', 'alice'], env);
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'p.yaml'), providerDoc('alice', 'provider-notes-alice', upstreamPort, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }\n');
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'p.yaml')], env);
  const app = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
  const system = `http://127.0.0.1:${pier.ports!.system}`;
  const ts = () => Math.floor(Date.now() / 1000);
  const accessBody = (t: number, token: string) => Buffer.from(JSON.stringify({ app_key: app.OS_APP_KEY, timestamp: t, token, perm: { ...NOTES, ops: ['echo'] } }));
  const t0 = ts();
  const first = await (await fetch(`${system}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: accessBody(t0, bcrypt.hashSync(`${app.OS_APP_KEY}${t0}${app.OS_APP_SECRET}`, 10)) })).json();
  const body = Buffer.alloc(1024, 'y');
  const direct: Target = { origin: `http://127.0.0.1:${upstreamPort}`, path: '/echo', method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body };
  const viaPier: Target = { origin: system, path: '/system-server/v1alpha1/legacy_notes/api.notes/v2/echo', method: 'POST', headers: { ...direct.headers, 'x-access-token': first.data.access_token }, body };
  return { app, system, accessBody, ts, direct, viaPier };
}

/** The same Pier with every span exported to a sink on the load core (docs/operations.md "Tracing"). */
async function measureTraced(dir: string, upstreamPort: number, direct: Target) {
  const sink = await otlpSink();
  try {
    const on = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' '), ...sink.env }));
    pinServer(on.proc.pid);
    try {
      const { viaPier } = await installNotes(on, dir, upstreamPort);
      await fixedRate(viaPier, 500, 2); // warm-up
      await fixedRate(direct, 500, 1);
      const fixed = await fixedRate(viaPier, 1000, 5);
      const max = await cpuPerOp(on.proc.pid!, () => maxRate(viaPier, 64, 5), (r) => r.requests);
      await new Promise((r) => setTimeout(r, 1_500)); // the last batch (sent every second)
      return { fixed, max, spans: await sink.spans() };
    } finally {
      await on.stop();
    }
  } finally {
    sink.stop();
  }
}

/**
 * Pier (one process, the `npm start` shape) in front of a provider in its own process, next to
 * calling that provider directly, with 1 KiB bodies. Plus the token endpoint, cold and warm, and
 * the edge's event-loop delay while invalid token requests flood in.
 */
export async function benchProvider(): Promise<Record<string, unknown>> {
  const dir = tempDir('pier-bench-');
  const upstream = await startChild('./upstream.js', [], SERVER_NODE_FLAGS);
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' ') }));
  pinServer(pier.proc.pid);
  try {
    const { app, system, accessBody, ts, direct, viaPier } = await installNotes(pier, dir, upstream.port);

    await fixedRate(viaPier, 500, 2); // warm-up: JIT, connection pools
    await fixedRate(direct, 500, 2);
    const d = await measureUtilisation(() => fixedRate(direct, 1000, 5));
    const p = await measureUtilisation(() => fixedRate(viaPier, 1000, 5));
    const maxDirect = await maxRate(direct, 64, 5);
    const pierCpu = await cpuPerOp(pier.proc.pid!, () => measureUtilisation(() => maxRate(viaPier, 64, 5)), (r) => r.result.requests);
    const maxPier = pierCpu.result;
    const floor = await passThrough(startChild('./floor-provider.js', [String(upstream.port)], SERVER_NODE_FLAGS), direct, d.result);
    const nginx = nginxMissing() ? { skipped: 'nginx is not installed (apt-get install -y nginx)' } : await passThrough(startNginx(join(dir, 'nginx'), upstream.port), direct, d.result);

    // Tokens: cold = every proof new (one bcrypt each, cost 10); warm = the same proof again (cache).
    const tc = ts();
    const proofs = await Promise.all(Array.from({ length: 60 }, () => bcrypt.hash(`${app.OS_APP_KEY}${tc}${app.OS_APP_SECRET}`, 10)));
    const pool = new Pool(system, { connections: 16 });
    const post = async (b: Buffer) => {
      const r = await pool.request({ path: '/permission/v1alpha1/access', method: 'POST', headers: { 'content-type': 'application/json' }, body: b });
      await r.body.arrayBuffer();
      return r.statusCode;
    };
    let c0 = performance.now();
    const coldStatuses = await Promise.all(proofs.map((pr) => post(accessBody(tc, pr))));
    const coldPerS = proofs.length / ((performance.now() - c0) / 1000);
    const warm = accessBody(tc, proofs[0]);
    c0 = performance.now();
    let warmDone = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i = 0; i < 250; i++) if ((await post(warm)) === 200) warmDone++;
    }));
    const warmPerS = warmDone / ((performance.now() - c0) / 1000);

    // Flood: 1,000 invalid token requests a second for 5 s (proofs made with a wrong secret).
    const bad = bcrypt.hashSync(`${app.OS_APP_KEY}${ts()}wrong-secret-wrong-secret`, 10);
    await eventLoopP99(pier.adminUrl); // resets the histogram
    const flood = await fixedRate({ origin: system, path: '/permission/v1alpha1/access', method: 'POST', headers: { 'content-type': 'application/json' }, body: accessBody(ts(), bad) }, 1000, 5, 429);
    const loopP99 = await eventLoopP99(pier.adminUrl);
    await pool.close();
    await pier.stop();
    const traced = await measureTraced(join(dir, 'traced'), upstream.port, direct);

    const added = (k: 'p50_ms' | 'p90_ms' | 'p99_ms') => round(p.result[k] - d.result[k]);
    const goals = [
      ratioAtLeast('provider throughput vs floor (uWS in, undici out)', maxPier.result.rps, floor.max_rate_rps, 0.67),
      ratioAtMost('provider cost per call vs floor (CPU µs of the proxying process)', pierCpu.cpu_us_per_op, floor.cpu_us_per_call, 1.5),
      ratioAtMost('provider added p99 at 1,000 rps vs floor (ms)', Math.max(0.001, added('p99_ms')), Math.max(0.001, floor.added_ms.p99), 2),
    ];
    return {
      shape: 'npm start (one process, in-process bus); provider in its own process; load generator in this process',
      server_node_flags: SERVER_NODE_FLAGS,
      fixed_rate_1000_rps_1KiB: {
        direct: d.result,
        via_pier: p.result,
        added_by_pier_ms: { p50: added('p50_ms'), p90: added('p90_ms'), p99: added('p99_ms') },
        goal_added_ms: { p50: 0.5, p90: 1, p99: 2 },
        loadgen_event_loop_utilisation: { direct: d.loadgen_event_loop_utilisation, via_pier: p.loadgen_event_loop_utilisation },
      },
      max_rate_64_clients: { direct_rps: maxDirect.rps, via_pier_rps: maxPier.result.rps, via_pier_p99_ms: maxPier.result.p99_ms, ratio: round(maxPier.result.rps / maxDirect.rps, 2), goal_ratio: 0.5, errors: maxPier.result.errors, loadgen_event_loop_utilisation: maxPier.loadgen_event_loop_utilisation },
      floor_uws_undici: floor,
      peer_nginx: nginx,
      cost_per_call_cpu_us: { via_pier: pierCpu.cpu_us_per_op, floor: floor.cpu_us_per_call, nginx: 'cpu_us_per_call' in nginx ? nginx.cpu_us_per_call : null, note: 'CPU time of the proxying process (all its threads) over the max-rate run, per answered call; the upstream is not counted' },
      goals,
      tokens_per_s: { cold_bcrypt_cost10: round(coldPerS, 1), cold_all_200: coldStatuses.every((s) => s === 200), warm_cached: Math.round(warmPerS) },
      tracing: {
        shape: 'the same Pier with every span exported (OTEL_TRACES_SAMPLER=always_on) to an OTLP sink on the load core; export off is the figures above',
        fixed_rate_1000_rps_added_by_pier_ms: { p50: round(traced.fixed.p50_ms - d.result.p50_ms), p99: round(traced.fixed.p99_ms - d.result.p99_ms) },
        max_rate_64_clients: { via_pier_rps: traced.max.result.rps, ratio_to_off: round(traced.max.result.rps / maxPier.result.rps, 2), errors: traced.max.result.errors },
        cost_per_call_cpu_us: { on: traced.max.cpu_us_per_op, off: pierCpu.cpu_us_per_op, added: round(traced.max.cpu_us_per_op - pierCpu.cpu_us_per_op) },
        spans_exported: traced.spans,
      },
      invalid_token_flood_1000_rps: { edge_event_loop_delay_p99_ms: round(loopP99), goal_ms: 10, answers_429: flood, note: 'the first failures cost a bcrypt each (401); past 10 the key is rate limited (429) and refused without a hash' },
    };
  } finally {
    await pier.stop();
    upstream.stop();
    cleanup(dir);
  }
}
