import { randomBytes } from 'node:crypto';
import { closeSync, fdatasyncSync, mkdirSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { cleanup, cli, fixedPorts, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { startJetStreamCluster } from '../test/helpers/nats-server.js';
import { startChild } from './children.js';
import { maxRate, round, type Target } from './load.js';
import { pinLoad, pinServer, SERVER_NODE_FLAGS } from './pinning.js';
import { atLeast, cpuPerOp, ratioAtLeast, ratioAtMost } from './goals.js';
import { floorAccessToken } from './floor-token.js';
import { jetStreamPublishFloor } from './jetstream-floor.js';
import { otlpSink } from './tracing.js';


/** The vault read's floor (floor-vault.ts), read as Pier is: 32 clients back to back, with its CPU per read. */
async function vaultFloor(dir: string, like: Target, mode: 'plain' | 'cached' = 'plain') {
  mkdirSync(dir, { recursive: true });
  const userToken = 'pier_floor-user-token';
  const macKey = randomBytes(32);
  const floor = await startChild('./floor-vault.js', [dir, userToken, macKey.toString('hex'), mode], SERVER_NODE_FLAGS);
  try {
    const target: Target = { ...like, origin: `http://127.0.0.1:${floor.port}`, headers: { ...like.headers, 'x-authorization': userToken, 'x-access-token': floorAccessToken(macKey) } };
    await maxRate(target, 32, 2); // warm-up
    const run = await cpuPerOp(floor.proc.pid!, () => maxRate(target, 32, 5), (r) => r.requests);
    if (run.result.errors > 0) throw new Error(`the vault floor refused ${run.result.errors} reads`);
    return { run: { rps: run.result.rps, p50_ms: run.result.p50_ms, p99_ms: run.result.p99_ms }, cpu_us_per_op: run.cpu_us_per_op };
  } finally {
    floor.stop();
  }
}

/**
 * Whether the values measured are sealed under value keys of their own (docs/vault.md "Destroyed"):
 * waited for (10 s at most: the vault's gate opens two heartbeats after its start), so every value
 * written below is; false on a release without them (no such route) or when the gate stays shut.
 */
async function sealingUnderValueKeys(env: Record<string, string>): Promise<boolean> {
  for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
    const status = await cli(['vault', 'rekey', '--status', '--json'], env);
    if (status.code !== 0) return false;
    if (status.json.sealingUnderValueKeys === true) return true;
  }
  return false;
}

/** Read and write system calls `pid` made so far (/proc/<pid>/io: syscr + syscw), 0 where it cannot be read. */
function ioSyscalls(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/^syscr: (\d+)/m.exec(io)?.[1] ?? 0) + Number(/^syscw: (\d+)/m.exec(io)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Secrets the update measurement spreads over: 32 clients seldom update the same one at once. */
const UPDATED_SECRETS = 256;

/**
 * Reads, durable creates and durable updates through the whole stack of `pier` (its system
 * listener), 32 clients, 1 KiB values. An update keeps the value it replaces as a version (docs/vault.md
 * "Versions"): one more write than a create, in the same commit.
 */
async function measure(
  pier: PierProcess,
  dir: string,
  measured: PierProcess[] = [pier],
  /** Server processes beside Pier (the NATS nodes) whose CPU per create is reported too. */
  beside: number[] = [],
): Promise<{ reads: Awaited<ReturnType<typeof maxRate>> & { cpu_us_per_op: number }; writes: Awaited<ReturnType<typeof maxRate>> & { cpu_us_per_op: number; beside_cpu_us_per_op: number; syscalls_per_op: number }; updates: Awaited<ReturnType<typeof maxRate>>; retrieve: Target; valueKeys: boolean }> {
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const user = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, UpdateSecret?workspace=chat] }\n');
  const app = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
  const valueKeys = await sealingUnderValueKeys(env);
  const ts = Math.floor(Date.now() / 1000);
  const access = await (
    await fetch(`http://${app.OS_SYSTEM_SERVER}/permission/v1alpha1/access`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ app_key: app.OS_APP_KEY, timestamp: ts, token: bcrypt.hashSync(`${app.OS_APP_KEY}${ts}${app.OS_APP_SECRET}`, 10), perm: { dataType: 'secret', group: 'secret.vault', version: 'v1', ops: ['RetrieveSecret?workspace=chat', 'CreateSecret?workspace=chat', 'UpdateSecret?workspace=chat'] } }),
    })
  ).json();
  const value = 'v'.repeat(1024);
  const headers = { 'content-type': 'application/json', 'x-authorization': user, 'x-access-token': access.data.access_token };
  const path = (op: string) => `/system-server/v1alpha1/secret/secret.vault/v1/${op}?workspace=chat`;
  await fetch(`http://${app.OS_SYSTEM_SERVER}${path('CreateSecret')}`, { method: 'POST', headers, body: JSON.stringify({ name: 'read-me', value }) });
  const retrieve: Target = { origin: `http://${app.OS_SYSTEM_SERVER}`, path: path('RetrieveSecret'), method: 'POST', headers, body: Buffer.from(JSON.stringify({ name: 'read-me' })) };
  const create: Target = { ...retrieve, path: path('CreateSecret') };
  await maxRate(retrieve, 32, 2); // warm-up
  const run = await cpuPerOp(measured.map((p) => p.proc.pid!), () => maxRate(retrieve, 32, 5), (r) => r.requests);
  const reads = { ...run.result, cpu_us_per_op: run.cpu_us_per_op };
  // CPU per create of Pier, and of the processes beside it (both on the server core): what a create costs that core.
  let besideCpu = 0;
  const syscalls = () => measured.reduce((sum, p) => sum + ioSyscalls(p.proc.pid!), 0);
  const syscallsBefore = syscalls();
  const created = await cpuPerOp(
    measured.map((p) => p.proc.pid!),
    async () => {
      const run = await cpuPerOp(beside, () => maxRate(create, 32, 5, (i) => Buffer.from(JSON.stringify({ name: `w-${i}`, value }))), (r) => r.requests);
      besideCpu = run.cpu_us_per_op;
      return run.result;
    },
    (r) => r.requests,
  );
  const writes = { ...created.result, cpu_us_per_op: created.cpu_us_per_op, beside_cpu_us_per_op: besideCpu, syscalls_per_op: round((syscalls() - syscallsBefore) / Math.max(1, created.result.requests), 1) };
  // Updates of secrets that exist (the creates above made w-0..): each keeps the value it replaces.
  const update: Target = { ...retrieve, path: path('UpdateSecret') };
  const updates = await maxRate(update, 32, 5, (i) => Buffer.from(JSON.stringify({ name: `w-${i % UPDATED_SECRETS}`, value })));
  return { reads, writes, updates, retrieve, valueKeys };
}

/**
 * Reads through an edge that runs apart from the actors and holds no master key (docs/security.md,
 * "Keys with an anchor"): what sealing to anchored keys costs where it happens. CPU is summed over
 * both processes, both pinned to the server core.
 */
export async function measureEdgeApart(dir: string, natsUrl: string) {
  const masterKey = randomBytes(32).toString('hex');
  mkdirSync(dir, { recursive: true });
  const anchors = await cli(['bus', 'anchors', '--out', join(dir, 'bus'), '--force', '--json'], { ...pierEnv(dir), PIER_MASTER_KEY: masterKey });
  if (anchors.code !== 0) throw new Error(`pier bus anchors: ${anchors.stderr}`);
  const edgePorts = await fixedPorts();
  const actors = await PierProcess.start(
    pierEnv(join(dir, 'actors'), { NATS_URL: natsUrl, PIER_MASTER_KEY: masterKey, PIER_SYSTEM_URL: `127.0.0.1:${edgePorts.PIER_SYSTEM_PORT}`, PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' ') }),
    ['--roles', 'registry,token,provider,vault,callback,upload,admin'],
    60_000,
  );
  const edge = await PierProcess.start(pierEnv(join(dir, 'edge'), { ...edgePorts, NATS_URL: natsUrl, PIER_BUS_ANCHORS: anchors.json.anchors, PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' ') }), ['--roles', 'edge'], 60_000);
  pinServer(actors.proc.pid);
  pinServer(edge.proc.pid);
  try {
    return await measure(actors, dir, [actors, edge]);
  } finally {
    await edge.stop();
    await actors.stop();
  }
}

/** The npm start shape again with span export on, every span (docs/operations.md "Tracing"): reads, creates, updates. */
async function measureTraced(dir: string) {
  const sink = await otlpSink();
  try {
    const on = await PierProcess.start(pierEnv(join(dir, 'data-traced'), { PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' '), ...sink.env }));
    pinServer(on.proc.pid);
    try {
      const run = await measure(on, join(dir, 'data-traced'));
      const metrics = await (await fetch(`${on.adminUrl}/metrics`)).text();
      const dropped = Number(/^pier_trace_spans_dropped_total(?:\{[^}]*\})? (\d+)/m.exec(metrics)?.[1] ?? 0);
      await new Promise((r) => setTimeout(r, 1_500)); // the last batch (sent every second)
      return { ...run, spans: await sink.spans(), dropped };
    } finally {
      await on.stop();
    }
  } finally {
    sink.stop();
  }
}

/**
 * RetrieveSecret and CreateSecret through the whole stack (one process, the `npm start` shape),
 * 32 clients back to back, 1 KiB values, next to a bare uWebSockets.js endpoint answering a constant;
 * then the same Pier with its state on a local 3-node JetStream cluster (R3).
 */
export async function benchVault(): Promise<Record<string, unknown>> {
  if (process.env.PIER_BENCH_VAULT === 'r3') return benchR3Only();
  const dir = tempDir('pier-bench-');
  // The reads' processes with the server flags (pinning.ts); the JetStream runs below without them:
  // there the actors mostly wait on NATS, and V8's helper threads mark meanwhile (lib/runtime/gc-threads.ts).
  const bare = await startChild('./bare-uws.js', [], SERVER_NODE_FLAGS);
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_NODE_FLAGS: SERVER_NODE_FLAGS.join(' ') }));
  pinServer(pier.proc.pid);
  try {
    const { reads, writes, updates, retrieve, valueKeys } = await measure(pier, dir);
    const ceiling: Target = { origin: `http://127.0.0.1:${bare.port}`, path: '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: retrieve.body };
    await maxRate(ceiling, 32, 2);
    const bareRun = await maxRate(ceiling, 32, 5);
    const floor = await vaultFloor(join(dir, 'floor'), retrieve);
    const floorCached = await vaultFloor(join(dir, 'floor-cached'), retrieve, 'cached');
    await pier.stop();
    const traced = await measureTraced(dir);

    // The same, with the registry and the vault on JetStream: 3 nodes, 3 copies, quorum writes.
    // Next to it, LMDB with the bus over the same NATS: the like-for-like figure for the reads.
    const nodes = await startJetStreamCluster(join(dir, 'js'), 3);
    for (const n of nodes) pinServer(n.pid);
    let r3;
    let lmdbNats;
    let edgeApart;
    let publishFloor;
    try {
      const overNats = await PierProcess.start(pierEnv(join(dir, 'data-nats'), { NATS_URL: nodes.map((n) => n.url).join(',') }), [], 60_000);
      pinServer(overNats.proc.pid);
      try {
        lmdbNats = await measure(overNats, join(dir, 'data-nats'));
      } finally {
        await overNats.stop();
      }
      // One node for both processes: nats.js picks a server at random, and a request crossing a
      // cluster route (two more hops on the same core) halves the rate in some runs and not others.
      edgeApart = await measureEdgeApart(join(dir, 'apart'), nodes[0].url);
      const replicated = await PierProcess.start(pierEnv(join(dir, 'data-js'), { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3' }), [], 60_000);
      pinServer(replicated.proc.pid);
      try {
        r3 = await measure(replicated, join(dir, 'data-js'), [replicated], nodes.map((n) => n.pid!));
      } finally {
        await replicated.stop();
      }
      publishFloor = await jetStreamPublishFloor(nodes.map((n) => n.url), nodes.map((n) => n.pid!));
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
    // What syncing before every acknowledgement costs (docs/operations.md "What an acknowledgement
    // means"): the same R3 shape on nats-server's default (synced every 2 minutes), and this disk's own fsync rate.
    const lazy = await r3OnDefaultSync(join(dir, 'js-default'));
    const fsyncs = diskFsyncsPerSecond(join(dir, 'fsync-probe'));
    return {
      shape: 'npm start (one process, in-process bus); 32 clients back to back from this process; 1 KiB values',
      server_node_flags: SERVER_NODE_FLAGS,
      values_under_value_keys: { lmdb: valueKeys, jetstream_r3: r3.valueKeys, note: 'whether the values measured were sealed under value keys of their own (docs/vault.md "Destroyed"), each wrapped by its scope\'s data key; false: under the data key, as 0.3.0 seals them' },
      bare_uws_constant: { rps: bareRun.rps, p50_ms: bareRun.p50_ms, p99_ms: bareRun.p99_ms },
      retrieve: { rps: reads.rps, p50_ms: reads.p50_ms, p99_ms: reads.p99_ms, errors: reads.errors, ratio_to_bare: round(reads.rps / bareRun.rps, 2), goal: 'ratio >= 0.3, p99 <= 5 ms' },
      floor_uws_lmdb_gcm: { ...floor.run, cpu_us_per_read: floor.cpu_us_per_op, note: 'uWS in, both tokens checked, LMDB get, AES-256-GCM open, JSON out: no bus, no actors' },
      floor_with_pier_caches: {
        ...floorCached.run,
        cpu_us_per_read: floorCached.cpu_us_per_op,
        note: 'the floor with the two caches Pier has (token digest remembered, value opened once per change): like for like; the goals stay against the floor above',
      },
      retrieve_cpu_us_per_read: { pier: reads.cpu_us_per_op, floor: floor.cpu_us_per_op, floor_with_pier_caches: floorCached.cpu_us_per_op },
      goals: [
        ratioAtLeast('vault read throughput vs floor', reads.rps, floor.run.rps, 0.67),
        ratioAtMost('vault read cost per call vs floor (CPU µs)', reads.cpu_us_per_op, floor.cpu_us_per_op, 1.5),
        ratioAtMost('vault read p99 vs floor (ms, 32 clients back to back)', reads.p99_ms, floor.run.p99_ms, 2),
        atLeast('vault durable creates on JetStream R3 (/s, 32 clients)', r3.writes.rps, 1000),
      ],
      create_durable: { rps: writes.rps, p50_ms: writes.p50_ms, p99_ms: writes.p99_ms, errors: writes.errors, goal: '>= 1000/s' },
      tracing: {
        shape: 'the same Pier with every span exported (OTEL_TRACES_SAMPLER=always_on) to an OTLP sink on the load core; export off is the figures above',
        retrieve: { rps: traced.reads.rps, p50_ms: traced.reads.p50_ms, p99_ms: traced.reads.p99_ms, errors: traced.reads.errors, cpu_us_per_read: traced.reads.cpu_us_per_op, ratio_to_off: round(traced.reads.rps / reads.rps, 2), added_cpu_us_per_read: round(traced.reads.cpu_us_per_op - reads.cpu_us_per_op) },
        create_durable: { rps: traced.writes.rps, p99_ms: traced.writes.p99_ms, errors: traced.writes.errors, ratio_to_off: round(traced.writes.rps / writes.rps, 2) },
        update_durable: { rps: traced.updates.rps, p99_ms: traced.updates.p99_ms, errors: traced.updates.errors, ratio_to_off: round(traced.updates.rps / updates.rps, 2) },
        spans_exported: traced.spans,
        spans_dropped: traced.dropped,
      },
      update_durable: {
        rps: updates.rps,
        p50_ms: updates.p50_ms,
        p99_ms: updates.p99_ms,
        errors: updates.errors,
        ratio_to_create: round(updates.rps / writes.rps, 2),
        note: `32 clients updating ${UPDATED_SECRETS} secrets, 1 KiB values: each update keeps the value it replaces as a version (one more record in the same commit)`,
      },
      jetstream_r3: {
        shape: 'the same process with PIER_STATE=jetstream on a local 3-node cluster (R3); the bus over NATS too',
        retrieve: {
          rps: r3.reads.rps,
          p50_ms: r3.reads.p50_ms,
          p99_ms: r3.reads.p99_ms,
          errors: r3.reads.errors,
          ratio_to_lmdb: round(r3.reads.rps / reads.rps, 2),
          ratio_to_lmdb_over_nats: round(r3.reads.rps / lmdbNats.reads.rps, 2),
          goal: 'ratio >= 0.8 (reads stay local)',
        },
        lmdb_over_nats: { retrieve_rps: lmdbNats.reads.rps, create_durable_rps: lmdbNats.writes.rps, note: 'LMDB state, the bus over the same NATS cluster: the like-for-like comparison' },
        edge_apart: {
          shape: 'LMDB state; the edge in a process of its own without the master key (the bus anchors), the actors in another; the bus over the same NATS cluster',
          retrieve: { rps: edgeApart.reads.rps, p50_ms: edgeApart.reads.p50_ms, p99_ms: edgeApart.reads.p99_ms, errors: edgeApart.reads.errors, cpu_us_per_read: edgeApart.reads.cpu_us_per_op, ratio_to_floor: round(edgeApart.reads.rps / floor.run.rps, 2) },
        },
        create_durable: {
          rps: r3.writes.rps,
          p50_ms: r3.writes.p50_ms,
          p99_ms: r3.writes.p99_ms,
          errors: r3.writes.errors,
          cpu_us_per_create: r3.writes.cpu_us_per_op,
          nats_cpu_us_per_create: r3.writes.beside_cpu_us_per_op,
          read_write_syscalls_per_create: r3.writes.syscalls_per_op,
          goal: '>= 1000/s',
        },
        publish_floor: publishFloor,
        update_durable: { rps: r3.updates.rps, p50_ms: r3.updates.p50_ms, p99_ms: r3.updates.p99_ms, errors: r3.updates.errors, ratio_to_create: round(r3.updates.rps / r3.writes.rps, 2), note: 'each update commits two intents in order (the version, then the secret), each quorum-acknowledged' },
        sync: {
          shape: 'the figures above are on nats-server with jetstream { sync_interval: always } (on disk before it acknowledges); these on its default (synced every 2 minutes: acknowledged in memory)',
          disk_fsyncs_per_s: fsyncs,
          default_sync: { create_durable_rps: lazy.writes.rps, create_p99_ms: lazy.writes.p99_ms, update_durable_rps: lazy.updates.rps, update_p99_ms: lazy.updates.p99_ms, errors: lazy.writes.errors + lazy.updates.errors },
          create_cost_of_sync: { ratio: round(r3.writes.rps / lazy.writes.rps, 2), added_ms_per_create_p50: round(r3.writes.p50_ms - lazy.writes.p50_ms, 2) },
          update_cost_of_sync: { ratio: round(r3.updates.rps / lazy.updates.rps, 2), added_ms_per_update_p50: round(r3.updates.p50_ms - lazy.updates.p50_ms, 2) },
        },
      },
    };
  } finally {
    await pier.stop();
    bare.stop();
    cleanup(dir);
  }
}

/** The R3 shape on nats-server's default sync (each node given a configuration without sync_interval). */
async function r3OnDefaultSync(dir: string) {
  mkdirSync(dir, { recursive: true });
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, '# nats-server defaults: JetStream synced every 2 minutes\n');
  const nodes = await startJetStreamCluster(join(dir, 'js'), 3, () => ['-c', conf]);
  for (const n of nodes) pinServer(n.pid);
  try {
    const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3' }), [], 60_000);
    pinServer(pier.proc.pid);
    try {
      return await measure(pier, join(dir, 'data'));
    } finally {
      await pier.stop();
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

/** 4 KiB written and fdatasync'd, 300 times, on the benchmark's disk: the rate a sync-before-ack store is bounded by, one writer. */
function diskFsyncsPerSecond(path: string): number {
  const fd = openSync(path, 'w');
  const page = Buffer.alloc(4096, 1);
  const began = process.hrtime.bigint();
  try {
    for (let i = 0; i < 300; i++) {
      writeSync(fd, page, 0, page.length, (i % 16) * 4096);
      fdatasyncSync(fd);
    }
  } finally {
    closeSync(fd);
  }
  return Math.round(300 / (Number(process.hrtime.bigint() - began) / 1e9));
}

/**
 * `PIER_BENCH_VAULT=r3 npm run bench -- vault`: only the JetStream R3 shape (reads, creates, updates
 * through Pier, then the publish floor on the same nodes), under the keys the full run gives them
 * (`jetstream_r3`): what a change to the replicated write path is compared by, in alternating runs,
 * without the minutes the other shapes take.
 */
async function benchR3Only(): Promise<Record<string, unknown>> {
  const dir = tempDir('pier-bench-');
  try {
    const nodes = await startJetStreamCluster(join(dir, 'js'), 3);
    for (const n of nodes) pinServer(n.pid);
    try {
      const replicated = await PierProcess.start(pierEnv(join(dir, 'data-js'), { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3' }), [], 60_000);
      // (A diagnosis: PIER_BENCH_R3_PIER_CORE=load puts Pier on the load generator's core, off the nodes' one.)
      if (process.env.PIER_BENCH_R3_PIER_CORE === 'load') pinLoad(replicated.proc.pid);
      else pinServer(replicated.proc.pid);
      let r3;
      try {
        r3 = await measure(replicated, join(dir, 'data-js'), [replicated], nodes.map((n) => n.pid!));
      } finally {
        await replicated.stop();
      }
      const publishFloor = await jetStreamPublishFloor(nodes.map((n) => n.url), nodes.map((n) => n.pid!));
      return {
        shape: 'PIER_BENCH_VAULT=r3: the JetStream R3 shape alone (see the full run for the others)',
        jetstream_r3: {
          values_under_value_keys: r3.valueKeys,
          retrieve: { rps: r3.reads.rps, p50_ms: r3.reads.p50_ms, p99_ms: r3.reads.p99_ms, errors: r3.reads.errors },
          create_durable: { rps: r3.writes.rps, p50_ms: r3.writes.p50_ms, p99_ms: r3.writes.p99_ms, errors: r3.writes.errors, cpu_us_per_create: r3.writes.cpu_us_per_op, nats_cpu_us_per_create: r3.writes.beside_cpu_us_per_op, read_write_syscalls_per_create: r3.writes.syscalls_per_op, goal: '>= 1000/s' },
          publish_floor: publishFloor,
          update_durable: { rps: r3.updates.rps, p50_ms: r3.updates.p50_ms, p99_ms: r3.updates.p99_ms, errors: r3.updates.errors, ratio_to_create: round(r3.updates.rps / r3.writes.rps, 2) },
        },
      };
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
  } finally {
    cleanup(dir);
  }
}
