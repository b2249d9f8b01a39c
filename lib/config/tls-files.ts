import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The TLS settings of the browser-facing listeners (docs/operations.md "TLS on the browser-facing listeners"). */
export interface TlsSettings {
  cert: string;
  key: string;
  /** Folder of `<host pattern>.crt` / `<host pattern>.key` pairs, chosen by SNI. */
  sniDir: string | null;
  listeners: string[];
}

/** A certificate checked and ready: the files uWS loads, and the host patterns it answers for. */
export interface CheckedCertificate {
  certFile: string;
  keyFile: string;
  /** SNI patterns (`*.alice.example.com`, `example.com`). */
  patterns: string[];
  subject: string;
  validTo: Date;
}

export class TlsFileError extends Error {
  override readonly name = 'TlsFileError';
}

function read(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new TlsFileError(`${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** DNS names of a certificate's subjectAltName (wildcards kept), lower-case. */
function dnsNames(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4).toLowerCase());
}

/**
 * Checks a certificate (a chain is accepted: the first block is the leaf) and its key: both parse,
 * the key is the certificate's, and the certificate is valid now. Every failure is one line naming
 * the file (docs/operations.md "TLS on the browser-facing listeners").
 */
export function checkCertificate(certFile: string, keyFile: string, what: string, now = new Date()): CheckedCertificate {
  const certPem = read(certFile, what);
  const keyPem = read(keyFile, what);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    throw new TlsFileError(`${what}: ${certFile} is not a PEM certificate`);
  }
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new TlsFileError(`${what}: ${keyFile} is not a PEM private key (or it is encrypted)`);
  }
  if (!cert.checkPrivateKey(key)) throw new TlsFileError(`${what}: ${keyFile} is not the key of ${certFile}`);
  const validTo = new Date(cert.validTo);
  if (validTo.getTime() <= now.getTime()) throw new TlsFileError(`${what}: ${certFile} expired on ${validTo.toISOString()}`);
  if (new Date(cert.validFrom).getTime() > now.getTime()) throw new TlsFileError(`${what}: ${certFile} is not valid before ${new Date(cert.validFrom).toISOString()}`);
  return { certFile, keyFile, patterns: dnsNames(cert), subject: cert.subject, validTo };
}

/** A host pattern as a file name may carry it: `*.alice.example.com`, `example.com`. */
const PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/**
 * Everything the listeners serve: the default certificate, then one per SNI pair of the folder,
 * each answering for the pattern its file is named after. Checked as a whole: one bad file and the
 * whole set is refused (at start: the start stops; at a reload: the old set stays).
 */
export function loadCertificates(settings: TlsSettings, now = new Date()): { fallback: CheckedCertificate; byName: CheckedCertificate[] } {
  const fallback = checkCertificate(settings.cert, settings.key, 'PIER_TLS_CERT', now);
  const byName: CheckedCertificate[] = [];
  if (settings.sniDir) {
    let files: string[];
    try {
      files = readdirSync(settings.sniDir);
    } catch (err) {
      throw new TlsFileError(`PIER_TLS_SNI_DIR: cannot read ${settings.sniDir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    for (const file of files.filter((f) => f.endsWith('.crt')).sort()) {
      const pattern = file.slice(0, -4).toLowerCase();
      if (!PATTERN.test(pattern)) throw new TlsFileError(`PIER_TLS_SNI_DIR: ${file}: the name must be a host pattern (example.com or *.example.com) followed by .crt`);
      const keyFile = join(settings.sniDir, `${file.slice(0, -4)}.key`);
      const checked = checkCertificate(join(settings.sniDir, file), keyFile, 'PIER_TLS_SNI_DIR', now);
      byName.push({ ...checked, patterns: [pattern] });
    }
  }
  return { fallback, byName };
}
