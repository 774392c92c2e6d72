/**
 * The sealed bytes, pinned. `sealStatement` (statement → JCS → PAE → sign → DSSE → digest) is
 * tuned for speed (docs/bench.md, issue 29); every such change must leave each output byte as it
 * was. A real ECDSA signature is randomised, so the signer here is a stand-in whose "signature" is
 * the SHA-256 of the bytes it is asked to sign: the envelope then pins the PAE bytes too. The
 * expected values were computed by the code before the seal path was optimised; the real-key
 * paths are checked by the DSSE tests beside this one and by cosign (test/conformance).
 */
import canonicalize from 'canonicalize';
import { hash, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  aibomStatement,
  artifactStatement,
  capabilityStatement,
  labelStatement,
  policyStatement,
  runStatement,
  sealStatement,
  signStatement,
  stepStatement,
  type Statement,
} from '../../../src/attest/index.ts';
import { keepsNoReference, type Signer } from '../../../src/signing/signer.ts';
import {
  aibomInput,
  artifactInput,
  capabilityInput,
  modelStepInput,
  policyInput,
  RUN_ID,
  runInput,
  toolStepInput,
} from './fixtures.ts';
import { p256Signer } from './keys.ts';

/** Deterministic stand-in: signs with SHA-256 of the data; its key is a real P-256 public key. */
function hashingSigner(): Signer {
  const real = p256Signer();
  return {
    keyId: 'sha256:' + '5e'.repeat(32),
    algorithm: 'ECDSA_P256_SHA256',
    publicKey: real.publicKey,
    sign: (data) => hash('sha256', data, 'buffer'),
  };
}

const labels = {
  namespace: 'team-a',
  kind: 'step',
  run_id: RUN_ID,
  step_id: 'summarize',
  policy_pack: 'baseline',
  policy_version: '1.4.0',
  capability_token_ids: [`capability:${RUN_ID}:summarize:0`],
};

/** A statement no builder makes: non-ASCII text, escapes, numbers JCS writes specially, key order. */
const unusual: Statement = {
  _type: 'https://in-toto.io/Statement/v1',
  subject: [{ name: 'odd:é"\\\n\u2028😀', digest: { sha256: 'd'.repeat(64) } }],
  predicateType: 'https://example.com/odd/v1',
  predicate: {
    z: [1e21, 1e-7, -0, 0.1, 333333333.3333333],
    a: { '10': 1, '9': 2, b: null, A: true },
    é: '\u0000',
  },
};

const cases: [string, Statement, string, string][] = [
  [
    'run',
    runStatement(runInput),
    '943c0cda2b41648492e65a8010fc1b976a4a7566ce3d84b53ddd8cc863a07aaf',
    'sha256:c652f53fbaefcc44c10dc1fa1c09c7227e08995d98aa25056b7384bbc1305126',
  ],
  [
    'model step',
    stepStatement(modelStepInput),
    '4aea1c6c7feaf5284b1cceaf236125972350f7a16877ddaa74458a6931a28d92',
    'sha256:f6f846b44e62f2fc8cfe24142c7bcc20c6df871d540730c02ee7eb89f5c8552d',
  ],
  [
    'tool step',
    stepStatement(toolStepInput),
    '57e949ece0eafe5b2c2a2d22d0ae1f5be2a9be1c96a61d9ea30a44945ef2437c',
    'sha256:09dde0bfbb93b0a4bbc2054e5d6d6c35f25f548d50ebbd19dcba2505d2d04740',
  ],
  [
    'artifact',
    artifactStatement(artifactInput),
    'b82e8e57040d2f9f3f307bcb9bfbccee1ad9805585bb5f232c6425270d0a0639',
    'sha256:3d48c3bcfd8bac35958a1b28404d196d69877128dd067c66d66ccc969717013c',
  ],
  [
    'policy',
    policyStatement(policyInput),
    '19d0a01efff57a78d58c7445d7ee941f708a584ba7e613c1aa603ae9c2d77307',
    'sha256:4b838b4d634bb941b5304d32c6e12650e86d23fa3a9f647853240fb7a0dfd703',
  ],
  [
    'capability',
    capabilityStatement(capabilityInput),
    'b3ce9bb7eeddde3d2bdc919b77cfd5a8ca7b2cd36548e65b79717231472bdba4',
    'sha256:5f1ce34d9779aa58f367d9b9fc6ec4d08907a064a49000bcd04b7c616a4c5807',
  ],
  [
    'aibom',
    aibomStatement(aibomInput),
    'f754516a94f8b74de660b5e226166b5077dca0b5b547c643914c9c9d7c9a97b6',
    'sha256:59a1406af291d8b21630b06a69d2181bc2d87135ac94a3981c9aa13ef7bfd0f4',
  ],
  [
    'labelled model step',
    labelStatement(stepStatement(modelStepInput), labels),
    'ae0fdbfa9578ddeeedf79597b3c5d99ad2f7697b1e70d81ed03d86e90e47844c',
    'sha256:a67927e9aef9fecbb4c48a3f4a55f0138e9ea6a66823a0b03b5047a3e58464fa',
  ],
  [
    'unusual',
    unusual,
    '9845aa7478d360efa17dd1563751c906ac9dd01991baca58bfe3891c72c1c4c2',
    'sha256:be865640ba6767d630253960a88738ef0023225c8b3efc134e166004c727ab73',
  ],
];

describe('sealStatement output bytes (pinned)', () => {
  it.each(cases)('%s: envelope and digest are the pinned bytes', (_, statement, payloadSha, digest) => {
    const sealed = sealStatement(statement, hashingSigner());
    expect(hash('sha256', Buffer.from(sealed.envelope.payload, 'base64'))).toBe(payloadSha);
    expect(sealed.digest).toBe(digest);
    expect(sealed.signature).toEqual({ algorithm: 'ECDSA_P256_SHA256', key_id: 'sha256:' + '5e'.repeat(32) });
    expect(signStatement(statement, hashingSigner())).toEqual(sealed.envelope);
    // And the same bytes by an independent JCS implementation and a PAE written out by hand.
    const payload = Buffer.from(sealed.envelope.payload, 'base64');
    expect(payload.toString('utf8')).toBe(canonicalize(statement));
    const pae = Buffer.concat([
      Buffer.from(`DSSEv1 28 application/vnd.in-toto+json ${payload.length} `),
      payload,
    ]);
    expect(sealed.envelope.signatures).toEqual([
      { keyid: 'sha256:' + '5e'.repeat(32), sig: hash('sha256', pae, 'base64') },
    ]);
    expect(sealed.digest).toBe(`sha256:${hash('sha256', canonicalize(sealed.envelope) ?? '')}`);
  });
});

describe('statement builders', () => {
  // Not about bytes (JCS sorts whatever the order) but about the seal path's speed: objects built
  // in JCS member order let canonicalJson serialise them with JSON.stringify alone (docs/bench.md,
  // issue 29). A builder edited without keeping the order fails here, not silently in the bench.
  it.each(cases.filter(([name]) => !['run', 'aibom', 'unusual'].includes(name)))(
    '%s: every object is built in JCS member order',
    (_, statement) => {
      expect(JSON.stringify(statement)).toBe(canonicalize(statement));
    },
  );
});

describe('the reused PAE buffer', () => {
  it('is handed only to signers that keep no reference; others keep what they were given', () => {
    const kept: Buffer[] = [];
    const keeping: Signer = {
      ...hashingSigner(),
      sign: (data) => (kept.push(data), hash('sha256', data, 'buffer')),
    };
    const first = signStatement(stepStatement(modelStepInput), keeping);
    const firstPae = Buffer.from(kept[0]!);
    signStatement(stepStatement(toolStepInput), keeping);
    signStatement(stepStatement(toolStepInput), p256Signer());
    // The first call's bytes are intact after later calls: its buffer was its own.
    expect(kept[0]!.equals(firstPae)).toBe(true);
    expect(kept[0]!.equals(kept[1]!)).toBe(false);
    expect(hash('sha256', kept[0]!, 'base64')).toBe(first.signatures[0]!.sig);
    expect(keepsNoReference(keeping)).toBe(false);
    expect(keepsNoReference(p256Signer())).toBe(true);
    expect(keepsNoReference(p256Signer().deterministic())).toBe(true);
  });

  it('gives key signers the same bytes, one statement after another, small and over 64 KiB', () => {
    const signer = p256Signer();
    const big = labelStatement(stepStatement(modelStepInput), {
      ...labels,
      capability_token_ids: Array.from({ length: 2000 }, (_, i) => `capability:${RUN_ID}:s:${i}`),
    });
    for (const statement of [
      stepStatement(modelStepInput),
      big,
      stepStatement(toolStepInput),
      big,
      artifactStatement(artifactInput),
    ]) {
      const envelope = signStatement(statement, signer);
      const payload = Buffer.from(envelope.payload, 'base64');
      expect(payload.toString('utf8')).toBe(canonicalize(statement));
      const pae = Buffer.concat([
        Buffer.from(`DSSEv1 28 application/vnd.in-toto+json ${payload.length} `),
        payload,
      ]);
      expect(
        verify('sha256', pae, signer.publicKey, Buffer.from(envelope.signatures[0]!.sig, 'base64')),
      ).toBe(true);
    }
    expect(Buffer.byteLength(canonicalize(big) ?? '')).toBeGreaterThan(64 * 1024);
  });
});
