import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A certificate and its key, as PEM files. */
export interface Pem {
  cert: string;
  key: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A throwaway certificate authority for one test (EC P-256, valid two days). */
export function makeCa(dir: string, name = 'pier-test-ca'): Pem {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-subj', `/CN=${name}`, '-days', '2'], dir);
  return { cert, key };
}

/**
 * A leaf signed by `ca` for `names` (DNS names, or IP addresses as `IP:127.0.0.1`), valid two days;
 * `expired`: already past its end.
 */
export function makeLeaf(dir: string, ca: Pem, file: string, names: string[], options: { expired?: boolean } = {}): Pem {
  const cert = join(dir, `${file}.pem`);
  const key = join(dir, `${file}.key`);
  const csr = join(dir, `${file}.csr`);
  const ext = join(dir, `${file}.ext`);
  const san = names.map((n) => (n.startsWith('IP:') ? n : `DNS:${n}`)).join(',');
  writeFileSync(ext, `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${names[0].replace(/^IP:/, '')}`], dir);
  // OpenSSL 3.0 has no -not_after: a negative validity ends the certificate a day before it starts.
  const validity = options.expired ? ['-days', '-1'] : ['-days', '2'];
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', cert, '-extfile', ext, ...validity], dir);
  return { cert, key };
}
