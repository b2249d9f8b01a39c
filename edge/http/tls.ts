import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import uWS from 'uWebSockets.js';
import { Counter } from 'prom-client';
import type { Logger } from '../../lib/runtime/log.js';
import type { Metrics } from '../../lib/runtime/metrics.js';
import { loadCertificates, type CheckedCertificate, type TlsSettings } from '../../lib/config/tls-files.js';

type Certificates = ReturnType<typeof loadCertificates>;

/** One SNI entry: a host pattern and the certificate that answers it. */
interface NamedCertificate {
  pattern: string;
  cert: CheckedCertificate;
}

/**
 * TLS for the browser-facing listeners (docs/operations.md "TLS on the browser-facing listeners"), terminated by uWS itself.
 *
 * Every certificate is served through SNI: the folder's pairs under their file names, the main
 * certificate under each DNS name it carries (wildcards included). Routes are attached to each SNI
 * domain, so a reload is `removeServerName` + `addServerName` + routes again, per pattern: new
 * handshakes get the new leaf, connections already open keep theirs and stay open. The main
 * certificate is also the app's default context, for clients that send no SNI (an IP address):
 * uWS cannot swap that one, so they keep the leaf loaded at start until a restart.
 */
export class TlsServing {
  private certificates: Certificates;
  private readonly apps: Array<{ app: uWS.TemplatedApp; setUp: (app: uWS.TemplatedApp) => void; patterns: string[] }> = [];
  private readonly watchers: FSWatcher[] = [];
  private readonly reloads: Counter<'outcome'>;
  private debounce: NodeJS.Timeout | null = null;
  private readonly onHangup = () => this.reload('SIGHUP');

  constructor(
    readonly settings: TlsSettings,
    private readonly log: Logger,
    metrics: Metrics,
  ) {
    this.certificates = loadCertificates(settings);
    this.reloads = new Counter({ name: 'pier_tls_reloads_total', help: 'Certificate reloads (SIGHUP or a changed file), by outcome', labelNames: ['outcome'], registers: [metrics.registry] });
  }

  /** Whether `listener` speaks TLS. */
  covers(listener: string): boolean {
    return this.settings.listeners.includes(listener);
  }

  /** An SSL app whose default context is the main certificate. */
  createApp(): uWS.TemplatedApp {
    const { certFile, keyFile } = this.certificates.fallback;
    return uWS.SSLApp({ cert_file_name: certFile, key_file_name: keyFile });
  }

  /**
   * Adds every SNI name to `app`, with `setUp` attaching the routes under each: called once the
   * default routes are mounted, and again for each pattern at every reload.
   */
  serveNames(app: uWS.TemplatedApp, setUp: (app: uWS.TemplatedApp) => void): void {
    const entry = { app, setUp, patterns: [] as string[] };
    this.apps.push(entry);
    entry.patterns = this.addNames(app, setUp, this.named(this.certificates));
  }

  private named(certs: Certificates): NamedCertificate[] {
    const out = new Map<string, CheckedCertificate>();
    // The folder's pairs win over the main certificate for the same pattern.
    for (const cert of certs.byName) for (const pattern of cert.patterns) out.set(pattern, cert);
    for (const pattern of certs.fallback.patterns) if (!out.has(pattern)) out.set(pattern, certs.fallback);
    return [...out].map(([pattern, cert]) => ({ pattern, cert }));
  }

  private addNames(app: uWS.TemplatedApp, setUp: (app: uWS.TemplatedApp) => void, names: NamedCertificate[]): string[] {
    for (const { pattern, cert } of names) {
      app.addServerName(pattern, { cert_file_name: cert.certFile, key_file_name: cert.keyFile });
      setUp(app.domain(pattern));
    }
    return names.map((n) => n.pattern);
  }

  /**
   * Loads the files again; if every one is good, swaps each SNI name to its new certificate. A bad
   * file keeps the certificates in use (logged, counted): a half-written renewal never takes the
   * listeners down.
   */
  reload(why: string): boolean {
    let next: Certificates;
    try {
      next = loadCertificates(this.settings);
    } catch (err) {
      this.reloads.inc({ outcome: 'refused' });
      this.log.error({ why, err: (err as Error).message }, 'tls: reload refused, the certificates in use stay');
      return false;
    }
    this.certificates = next;
    const names = this.named(next);
    for (const entry of this.apps) {
      for (const pattern of entry.patterns) entry.app.removeServerName(pattern);
      entry.patterns = this.addNames(entry.app, entry.setUp, names);
    }
    this.reloads.inc({ outcome: 'ok' });
    this.log.info({ why, names: names.map((n) => `${n.pattern} (${n.cert.subject.replace(/\n/g, ', ')}, until ${n.cert.validTo.toISOString()})`) }, 'tls: certificates reloaded');
    return true;
  }

  /**
   * Reloads on SIGHUP and when a file changes (debounced: a renewal writes several files). The
   * folders are watched, not the files: renewals replace files by rename, and a watch on a file
   * would stay on the old one.
   */
  watchForChanges(): void {
    process.on('SIGHUP', this.onHangup);
    const wanted = new Map<string, (name: string) => boolean>();
    const add = (dir: string, match: (name: string) => boolean) => {
      const before = wanted.get(dir);
      wanted.set(dir, before ? (n) => before(n) || match(n) : match);
    };
    add(dirname(this.settings.cert), (n) => n === basename(this.settings.cert));
    add(dirname(this.settings.key), (n) => n === basename(this.settings.key));
    if (this.settings.sniDir) add(this.settings.sniDir, (n) => n.endsWith('.crt') || n.endsWith('.key'));
    for (const [dir, match] of wanted) {
      try {
        this.watchers.push(
          watch(dir, (_event, name) => {
            if (name !== null && !match(String(name))) return;
            if (this.debounce) clearTimeout(this.debounce);
            this.debounce = setTimeout(() => this.reload(`changed: ${join(dir, String(name ?? ''))}`), 300);
          }),
        );
      } catch (err) {
        this.log.warn({ dir, err: (err as Error).message }, 'tls: cannot watch a certificate folder (SIGHUP still reloads)');
      }
    }
  }

  stop(): void {
    process.off('SIGHUP', this.onHangup);
    if (this.debounce) clearTimeout(this.debounce);
    for (const w of this.watchers) w.close();
  }
}
