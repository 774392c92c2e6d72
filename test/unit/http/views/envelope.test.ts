import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';
import { makeStatement, signStatement, stepStatement } from '../../../../src/attest/index.ts';
import { sealRecord } from '../../../../src/recorder/index.ts';
import { attestationPage, ndjsonLine, sendBody, toApiEnvelope } from '../../../../src/http/views/envelope.ts';
import { envelopeSchema, queryPageSchema, transparencyViewSchema } from '../../../../src/http/schemas.ts';
import {
  ATTESTATION_KINDS,
  type AttestationKind,
  type StoredAttestation,
} from '../../../../src/vault/index.ts';
import { logSigner } from '../../transparency/fixtures.ts';

/**
 * The hot routes send JSON.stringify of builder output, not Fastify's schema serializer: the
 * builders must copy nothing the published response schemas do not list. Every record kind is
 * built with extra fields planted at every level (record, envelope, signatures, signature
 * metadata, statement subjects, transparency view), all marked LEAK, and the body is checked
 * against the schemas closed with additionalProperties: false where they list properties.
 */

const addFormats = addFormatsModule.default;

/** A deep copy of `schema` in which every object schema listing properties admits no others. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'enum' || k === 'required' ? v : closed(v);
  if ('properties' in out && !('additionalProperties' in out)) out.additionalProperties = false;
  return out;
}

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
for (const s of [transparencyViewSchema, envelopeSchema, queryPageSchema]) ajv.addSchema(closed(s) as object);
const validEnvelope = ajv.getSchema('AttestationEnvelope')!;
const validPage = ajv.getSchema('AttestationPage')!;

const signer = logSigner('ec');
const LEAK = 'LEAK';

function stored(kind: AttestationKind, seq: number): StoredAttestation {
  const runId = '0190a6c0-0000-7000-8000-000000000001';
  const subject = [
    {
      name: `${kind}:${runId}`,
      digest: { sha256: 'ab'.repeat(32), weird: 7 as unknown as string },
      annotations: { note: LEAK },
    },
  ];
  const predicate =
    kind === 'capability'
      ? { chain: [{ scope: 'model:invoke', grantedBy: 'lead', approvedBy: 'security' }] }
      : { kind };
  const envelope = signStatement(
    makeStatement(subject, `https://example.test/${kind}/v1`, predicate),
    signer,
  );
  const record = {
    id: `0190a6c0-0000-7000-8000-${String(seq).padStart(12, '0')}`,
    seq,
    namespace: 'team-a',
    runId,
    stepId: kind === 'step' ? 'summarise' : null,
    kind,
    subjects: [`${kind}:${runId}`],
    artifactDigests: [],
    predicateType: `https://example.test/${kind}/v1`,
    policyPack: 'baseline',
    policyVersion: '1.0.0',
    capabilityTokenIds: [],
    envelope: {
      ...envelope,
      junk: LEAK,
      signatures: envelope.signatures.map((s) => ({ ...s, cert: LEAK })),
    },
    digest: `sha256:${'cd'.repeat(32)}`,
    prevDigest: `sha256:${'ef'.repeat(32)}`,
    signature: { algorithm: signer.algorithm, key_id: signer.keyId, cert_chain_ref: null, internal: LEAK },
    c2paManifestRef: null,
    createdAt: new Date('2026-01-01T00:00:00Z'),
    // A column the API never shows.
    leaseOwner: LEAK,
    // Every other record is time-stamped (the time-stamp row with a planted field too).
    ...(seq % 2 === 0
      ? {
          timestamp: {
            genTime: new Date('2026-01-01T00:00:01.250Z'),
            tsa: 'CN=tsa',
            serial: '0a',
            response: Buffer.from('token'),
            stampedBy: LEAK,
          },
        }
      : {}),
    // Capability and step records carry their tokens (each with a planted field) and chains.
    ...(kind === 'capability' || kind === 'step'
      ? {
          capabilityTokens: [{ format: 'vc+jwt' as const, id: 'urn:x', token: 'a.b.c', kid: LEAK }],
          capabilityChains:
            kind === 'step'
              ? [
                  {
                    capability: `capability:${runId}:summarise:0`,
                    step: `step:${runId}:summarise`,
                    root: null,
                    links: [{ scope: 'model:invoke', granted_by: 'team:lead', approved_by: null }],
                    scope: 'model:invoke',
                    granted_by: 'team:lead',
                    approved_by: null,
                  },
                ]
              : [],
        }
      : {}),
  };
  return record;
}

const views = [
  null,
  { job_id: 'j1', status: 'queued', attempts: 0, lease_owner: LEAK },
  {
    job_id: 'j2',
    status: 'published',
    backend: 'local',
    mode: 'dry_run',
    entry_id: 'ab'.repeat(32),
    log_index: 4,
    receipt: 'AAAA',
    receipt_media_type: 'application/cose',
    statement: 'AAAA',
    published_at: '2026-01-01T00:00:01.000Z',
    attempts: 1,
    lease_expires_at: LEAK,
  },
];

describe('allow-listing response builders', () => {
  it('every record kind, with fields planted at every level, matches the closed envelope schema', () => {
    let seq = 0;
    for (const kind of ATTESTATION_KINDS) {
      for (const view of views) {
        const body = toApiEnvelope(stored(kind, ++seq), view);
        const ok = validEnvelope(body);
        expect(validEnvelope.errors ?? [], `${kind} ${String(view?.job_id)}`).toEqual([]);
        expect(ok).toBe(true);
        expect(JSON.stringify(body)).not.toContain(LEAK);
        // What stays: the signed bytes a client recomputes the digest from, and the join.
        expect(body.envelope.signatures).toHaveLength(1);
        expect(body.signature.timestamp).toEqual(
          seq % 2 === 0
            ? { time: '2026-01-01T00:00:01.250Z', tsa: 'CN=tsa', signed_timestamp: 'dG9rZW4=' }
            : undefined,
        );
        expect(body.subject[0]).toEqual({
          name: `${kind}:0190a6c0-0000-7000-8000-000000000001`,
          digest: { sha256: 'ab'.repeat(32) },
        });
        expect(body.capability_chain === null).toBe(kind !== 'capability' && kind !== 'step');
        expect(body.capability_chain?.length ?? 0).toBe(kind === 'capability' || kind === 'step' ? 1 : 0);
        expect(body.capability_tokens === undefined).toBe(kind !== 'capability' && kind !== 'step');
        if (view !== null)
          expect(body.transparency).toMatchObject({ job_id: view.job_id, attempts: view.attempts });
      }
    }
  });

  it('a page holds builder items only and matches the closed page schema', () => {
    const items = ATTESTATION_KINDS.map((kind, i) =>
      toApiEnvelope(stored(kind, i + 1), views[i % views.length]),
    );
    const page = attestationPage(items, 'cursor', 1);
    expect(validPage(page)).toBe(true);
    expect(validPage.errors ?? []).toEqual([]);
    expect(JSON.stringify(page)).not.toContain(LEAK);
  });

  it('sends exactly the JSON of the body, as UTF-8 bytes', () => {
    const body = toApiEnvelope(stored('step', 1), views[2]);
    const sent: { type?: string; payload?: unknown } = {};
    const reply = {
      type(t: string) {
        sent.type = t;
        return this;
      },
      send(p: unknown) {
        sent.payload = p;
        return this;
      },
    } as unknown as FastifyReply;
    sendBody(reply, body);
    expect(sent.type).toBe('application/json; charset=utf-8');
    expect(JSON.parse((sent.payload as Buffer).toString('utf8'))).toEqual(JSON.parse(JSON.stringify(body)));
    expect(ndjsonLine(body)).toBe(`${JSON.stringify(body)}\n`);
  });

  it('the closed schema check itself rejects a planted field (the test can fail)', () => {
    const body = { ...toApiEnvelope(stored('run', 1), null) };
    expect(validEnvelope({ ...body, lease_owner: LEAK })).toBe(false);
    expect(validEnvelope({ ...body, envelope: { ...body.envelope, junk: LEAK } })).toBe(false);
    expect(
      validEnvelope({ ...body, transparency: { job_id: 'j', status: 'queued', attempts: 0, x: 1 } }),
    ).toBe(false);
  });
});

describe('records that do not match their signed statement are not served', () => {
  const runId = '0190a6c0-0000-7000-8000-000000000002';
  /** A record as the recorder stores it: labels signed in the statement (ADR 0007). */
  const sealed = (): StoredAttestation => {
    const statement = stepStatement({
      runId,
      stepId: 'fetch',
      kind: 'tool',
      tool: { name: 'curl', command: ['curl'] },
      inputs: {},
      output: null,
      phase: 'succeeded',
      startedAt: '2026-01-01T00:00:00Z',
      finishedAt: '2026-01-01T00:00:01Z',
      policyPack: { name: 'baseline', version: '1.0.0' },
    });
    const r = sealRecord(statement, signer, {
      namespace: 'team-a',
      kind: 'step',
      runId,
      stepId: 'fetch',
      policyPack: { name: 'baseline', version: '1.0.0' },
      capabilityTokenIds: [`capability:${runId}:fetch:0`],
    });
    return {
      ...r,
      id: '0190a6c0-0000-7000-8000-000000000009',
      seq: 9,
      runId: r.runId ?? null,
      stepId: r.stepId ?? null,
      artifactDigests: r.artifactDigests ?? [],
      policyPack: r.policyPack ?? null,
      policyVersion: r.policyVersion ?? null,
      capabilityTokenIds: r.capabilityTokenIds ?? [],
      signature: { algorithm: r.signature.algorithm, key_id: r.signature.key_id, cert_chain_ref: null },
      c2paManifestRef: null,
      prevDigest: `sha256:${'ef'.repeat(32)}`,
      createdAt: new Date('2026-01-01T00:00:00Z'),
    };
  };
  const tamperedCode = (r: StoredAttestation): string | undefined => {
    try {
      toApiEnvelope(r);
      return undefined;
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };

  it('serves a sealed record as stored', () => {
    const body = toApiEnvelope(sealed());
    expect(body.namespace).toBe('team-a');
    expect(body.subjects).toEqual([`step:${runId}:fetch`]);
  });

  it('refuses every relabelled column with RECORD_TAMPERED (500)', () => {
    const other = '0190a6c0-0000-7000-8000-0000000000ff';
    const relabels: Partial<StoredAttestation>[] = [
      { namespace: 'team-b' },
      { runId: other },
      { stepId: 'train' },
      { stepId: null },
      { kind: 'run' },
      { subjects: [`step:${other}:fetch`] },
      { subjects: [`step:${runId}:fetch`, `run:${other}`] },
      { policyPack: 'other' },
      { policyVersion: '2.0.0' },
      { capabilityTokenIds: [] },
      { artifactDigests: [`sha256:${'aa'.repeat(32)}`] },
      { predicateType: 'https://slsa.dev/provenance/v1' },
    ];
    for (const change of relabels) {
      expect(tamperedCode({ ...sealed(), ...change }), JSON.stringify(change)).toBe('RECORD_TAMPERED');
    }
    const r = sealed();
    // A payload that is not a statement (it could carry another tenant's bytes behind junk).
    const junk = Buffer.concat([Buffer.from('x'), Buffer.from(r.envelope.payload, 'base64')]).toString(
      'base64',
    );
    expect(tamperedCode({ ...r, envelope: { ...r.envelope, payload: junk } })).toBe('RECORD_TAMPERED');
    const err = (() => {
      try {
        toApiEnvelope({ ...r, namespace: 'team-b' });
      } catch (e) {
        return e as { status: number; message: string };
      }
    })();
    expect(err?.status).toBe(500);
    expect(err?.message).toMatch(/namespace/);
  });
});
