/**
 * withTls (src/vault/pool.ts): the URL's ssl parameters go (node-postgres would let them replace the
 * options), the CA is the file's, and the certificate must name the URL's host, an IP address too
 * (node-postgres alone would check `localhost` for an IP host). Against a real server:
 * test/integration/failover/tls.test.ts.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTls } from '../../../src/vault/index.ts';
import { generateServerPki } from '../../helpers/tls-pki.ts';

let dir: string;
let caFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vault-tls-'));
  caFile = join(dir, 'ca.pem');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The fields tls.checkServerIdentity reads, from a PEM certificate. */
function peer(pem: string): PeerCertificate {
  const c = new X509Certificate(pem);
  return {
    subject: { CN: '127.0.0.1' },
    subjectaltname: c.subjectAltName ?? '',
  } as unknown as PeerCertificate;
}

describe('withTls', () => {
  it('drops the ssl parameters of the URL and keeps the rest', async () => {
    const pki = await generateServerPki();
    await writeFile(caFile, pki.ca);
    const { connectionString, ssl } = withTls(
      'postgres://u:p@db.example.test:5432/vault?sslmode=disable&sslrootcert=/x&application_name=a',
      { caFile },
    );
    expect(connectionString).toBe('postgres://u:p@db.example.test:5432/vault?application_name=a');
    expect(ssl.ca).toBe(pki.ca);
    expect(ssl.rejectUnauthorized).toBe(true);
  });

  it("checks the URL's host against the certificate, IP addresses included", async () => {
    const pki = await generateServerPki(['127.0.0.1', 'db.example.test']);
    await writeFile(caFile, pki.ca);
    const check = (url: string) =>
      withTls(url, { caFile }).ssl.checkServerIdentity!('ignored', peer(pki.cert));
    expect(check('postgres://u@127.0.0.1:5432/v')).toBeUndefined();
    expect(check('postgres://u@db.example.test:5432/v')).toBeUndefined();
    expect(check('postgres://u@10.0.0.9:5432/v')).toBeInstanceOf(Error);
    expect(check('postgres://u@other.example.test:5432/v')).toBeInstanceOf(Error);
  });
});
