import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  artifactStatement,
  canonicalJson,
  sealStatement,
  stepStatement,
  type DsseEnvelope,
} from '../../src/attest/index.ts';
import { generateDevPki } from '../../hack/dev-pki.ts';
import { sealRecord } from '../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../src/signing/index.ts';
import { stack } from '../helpers/stack.ts';

/**
 * DSSE envelopes checked by an independent verifier: cosign (built from the Go module proxy by
 * hack/ensure-tools.sh), offline, against the public key.
 */
const run = promisify(execFile);
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cosign-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function cosignVerify(signer: KeySigner, envelope: DsseEnvelope, type: string, blob: Buffer) {
  const key = join(dir, `${signer.keyId.slice(7, 19)}.pub`);
  await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
  const sig = join(dir, 'envelope.json');
  const blobFile = join(dir, 'blob');
  await writeFile(sig, JSON.stringify(envelope));
  await writeFile(blobFile, blob);
  return run(
    stack().tools.cosign,
    [
      'verify-blob-attestation',
      '--key',
      key,
      '--signature',
      sig,
      '--type',
      type,
      '--insecure-ignore-tlog=true',
      blobFile,
    ],
    { env: { ...process.env, COSIGN_EXPERIMENTAL: '0', TUF_ROOT: join(dir, 'tuf') } },
  ).then(
    (r) => ({ ok: true, out: r.stdout + r.stderr }),
    (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

describe.each(['ECDSA_P256_SHA256', 'ED25519'] as const)('cosign verify-blob-attestation (%s)', (alg) => {
  let signer: KeySigner;
  beforeAll(async () => {
    signer = signerFromPem(await generateDevPki({ leafAlgorithm: alg }));
  });

  it('accepts a step attestation whose subject is the step output', async () => {
    const output = { text: 'hello' };
    const statement = stepStatement({
      runId: '0190a5c8-1234-7abc-8def-0123456789ab',
      stepId: 'summarise',
      kind: 'model',
      model: { name: 'm', provider: 'p', version: '1', temperature: 0 },
      inputs: { prompt: 'hi' },
      output,
      phase: 'succeeded',
      startedAt: '2026-01-01T00:00:00Z',
      finishedAt: '2026-01-01T00:00:01Z',
      policyPack: { name: 'baseline', version: '1' },
    });
    const { envelope } = sealStatement(statement, signer);
    const res = await cosignVerify(
      signer,
      envelope,
      statement.predicateType,
      Buffer.from(canonicalJson(output)),
    );
    expect(res.out).toContain('Verified OK');
    expect(res.ok).toBe(true);
  });

  it('accepts an artifact attestation over the artifact bytes, and rejects other bytes or a changed envelope', async () => {
    const blob = Buffer.from('{"bom_format":"CycloneDX"}');
    const { createHash } = await import('node:crypto');
    const statement = artifactStatement({
      runId: '0190a5c8-1234-7abc-8def-0123456789ab',
      name: 'aibom',
      mediaType: 'application/json',
      sha256: createHash('sha256').update(blob).digest('hex'),
      size: blob.length,
      bucket: 'aibom-vault',
      key: 'runs/r/aibom.json',
    });
    const { envelope } = sealStatement(statement, signer);
    expect((await cosignVerify(signer, envelope, statement.predicateType, blob)).ok).toBe(true);
    expect((await cosignVerify(signer, envelope, statement.predicateType, Buffer.from('other'))).ok).toBe(
      false,
    );
    const payload = Buffer.from(envelope.payload, 'base64');
    payload.writeUInt8(payload.readUInt8(payload.length - 2) ^ 1, payload.length - 2);
    const tampered = { ...envelope, payload: payload.toString('base64') };
    expect((await cosignVerify(signer, tampered, statement.predicateType, blob)).ok).toBe(false);
  });

  it('accepts a record as the recorder seals it: the vault labels signed in a subject annotation (ADR 0007)', async () => {
    const blob = Buffer.from('{"bom_format":"CycloneDX","labelled":true}');
    const { createHash } = await import('node:crypto');
    const runId = '0190a5c8-1234-7abc-8def-0123456789ab';
    const statement = artifactStatement({
      runId,
      name: 'aibom',
      mediaType: 'application/json',
      sha256: createHash('sha256').update(blob).digest('hex'),
      size: blob.length,
      bucket: 'aibom-vault',
      key: 'runs/r/aibom.json',
    });
    const record = sealRecord(statement, signer, {
      namespace: 'team-a',
      kind: 'artifact',
      runId,
      stepId: 'summarise',
    });
    const signed = JSON.parse(Buffer.from(record.envelope.payload, 'base64').toString('utf8')) as {
      subject: { annotations?: Record<string, unknown> }[];
    };
    expect(signed.subject[0]!.annotations).toHaveProperty(
      ['vault.service.dev/record', 'namespace'],
      'team-a',
    );
    const res = await cosignVerify(signer, record.envelope, statement.predicateType, blob);
    expect(res.out).toContain('Verified OK');
    expect(res.ok).toBe(true);
    expect(
      (await cosignVerify(signer, record.envelope, statement.predicateType, Buffer.from('other'))).ok,
    ).toBe(false);
  });
});
