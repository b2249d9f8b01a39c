import { spawnSync } from 'node:child_process';

/** Debian's chromium, when installed (scripts/ensure-chromium.js installs it as root). */
export function findChromium(): string | null {
  for (const name of ['chromium', 'chromium-browser']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}
