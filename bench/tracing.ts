import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { lineReader } from './children.js';
import { pinLoad } from './pinning.js';

/**
 * An OTLP sink (otlp-sink.ts) on the load generator's core, and the environment that makes a Pier
 * export every span to it (100 % sampling): what tracing costs Pier, measured as docs/operations.md
 * "Tracing" sets it up.
 */
export async function otlpSink(): Promise<{ env: Record<string, string>; spans(): Promise<number>; stop(): void }> {
  const proc = spawn(process.execPath, [fileURLToPath(new URL('./otlp-sink.js', import.meta.url))], { stdio: ['pipe', 'pipe', 'inherit'] });
  pinLoad(proc.pid);
  const next = lineReader(proc);
  const port = Number(await next());
  return {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'pier-bench' },
    spans: () => {
      const answer = next();
      proc.stdin!.write('count\n');
      return answer.then(Number);
    },
    stop: () => proc.kill('SIGKILL'),
  };
}
