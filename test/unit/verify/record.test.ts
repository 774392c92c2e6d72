import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { encodeKeySet, logKeyOf } from '../../../src/cose/key.ts';
import { signerEntry } from '../../../src/export/keys.ts';
import { uiRecordVerifier, VerificationCache, verifyRecords } from '../../../src/http/ui/verify.ts';
import { sealRecord } from '../../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { toApiEnvelope, type ApiEnvelope } from '../../../src/http/views/envelope.ts';
import { trustBundleOf } from '../../../src/attest/trust-bundle.ts';
import { policyStatement } from '../../../src/attest/index.ts';
import { recordVerifier } from '../../../src/verify/record.ts';
import { storedRecord } from '../../helpers/records.ts';
import { logSigner } from '../transparency/fixtures.ts';
import { fixture, type Fixture } from './fixtures.ts';

/**
 * src/verify/record.ts, the one verdict of `service-ctl verify <record>` and of the web UI's
 * verification column: both give the same state for the same record, whatever is wrong with it;
 * receipts are checked with log keys, and a record claiming a remote SCITT publication with a
 * receipt of the deployment's own log is refused (RECEIPT_NOT_REMOTE).
 */
const RUN = '0190a5c8-0000-7000-8000-0000000000aa';
let f: Fixture;
let keysJson: Record<string, unknown>;
let expired: KeySigner;

const entryJson = (s: KeySigner) => {
  const e = signerEntry(s, { namespace: '', role: 'signer' });
  return {
    cert_chain_ref: e.certRef,
    key_id: e.keyId,
    namespace: '',
    role: 'signer',
    chain_pem: e.chainPem,
    ca_pem: e.caPem,
    first_used_at: '2020-01-01T00:00:00.000Z',
  };
};

beforeAll(async () => {
  f = await fixture();
  // A leaf that expired a day ago (and no time-stamp on its records): judged now, it fails.
  expired = signerFromPem(
    await generateDevPki({
      caNotBefore: new Date(Date.now() - 20 * 86_400_000),
      notBefore: new Date(Date.now() - 10 * 86_400_000),
      notAfter: new Date(Date.now() - 86_400_000),
    }),
    { at: new Date(Date.now() - 5 * 86_400_000) },
  );
  keysJson = {
    trust_anchors_pem: [...f.signer.caCertificates, ...expired.caCertificates]
      .map((c) => c.toString())
      .join(''),
    tsa_trust_anchors_pem: '',
    signers: [entryJson(f.signer), entryJson(expired)],
    log_keys: { cose_key_set: encodeKeySet([f.logKey]).toString('base64'), entries: [] },
  };
});

const views = () => [...f.views.values()];
const byKind = (kind: string) => views().find((v) => v.kind === kind)!;
const edited = (v: ApiEnvelope, edit: (r: Record<string, unknown>) => void): Record<string, unknown> => {
  const r = structuredClone(v) as unknown as Record<string, unknown>;
  edit(r);
  return r;
};

describe('the CLI and the web UI: one verdict per record', () => {
  it('agree on intact, tampered, unknown-signer and expired records', async () => {
    const expiredRecord = toApiEnvelope(
      storedRecord(
        sealRecord(
          policyStatement({ runId: RUN, pack: 'p', version: '1', guardrails: [], decision: 'allow' }),
          expired,
          {
            namespace: 'team-a',
            runId: 'r',
            kind: 'policy',
          },
        ),
        1,
      ),
    );
    const cases: [string, unknown, 'verified' | 'failed' | 'unknown_key'][] = [
      ['intact', byKind('policy'), 'verified'],
      ['intact step', byKind('step'), 'verified'],
      [
        'payload changed',
        edited(
          byKind('policy'),
          (r) => ((r.envelope as { payload: string }).payload = Buffer.from('{}').toString('base64')),
        ),
        'failed',
      ],
      [
        'unknown certificate',
        edited(
          byKind('policy'),
          (r) => ((r.signature as { cert_chain_ref: string }).cert_chain_ref = `sha256:${'e'.repeat(64)}`),
        ),
        'unknown_key',
      ],
      ['expired, no time-stamp', expiredRecord, 'failed'],
    ];
    const bundle = trustBundleOf(keysJson);
    const cli = recordVerifier({ bundle }, { capabilities: false });
    const ui = uiRecordVerifier(keysJson);
    for (const [name, record, state] of cases) {
      const verdict = await cli(record);
      const page = await ui(record as Record<string, unknown>);
      expect(page.state, name).toBe(state);
      expect(verdict.ok, name).toBe(state === 'verified');
      if (page.state !== 'verified')
        expect(page.problems, name).toEqual(verdict.result.problems.map((p) => `${p.code}: ${p.message}`));
    }
    expect((await cli(expiredRecord)).result.problems.map((p) => p.code)).toContain('CERTIFICATE_EXPIRED');
  });

  it('capability chains: checked by default (a chain line only for a record that verified)', async () => {
    const bundle = trustBundleOf(keysJson);
    const verify = recordVerifier({ bundle });
    const step = byKind('step');
    expect((await verify(step)).chains.length).toBeGreaterThan(0);
    const tampered = edited(step, (r) => {
      const t = (r.capability_tokens as { format: string; token: string }[]).find(
        (x) => x.format === 'vc+jwt',
      )!;
      t.token = `${t.token.slice(0, -4)}AAAA`;
    });
    const verdict = await verify(tampered);
    expect(verdict.ok).toBe(false);
    expect(verdict.result.problems.map((p) => p.code)).toContain('TOKEN_SIGNATURE_INVALID');
    expect(verdict.chains).toEqual([]);
  });
});

describe('receipts: with log keys, and the claim of a remote publication', () => {
  it('a dry-run receipt of the own log verifies as what it says it is', async () => {
    const verify = recordVerifier(
      { bundle: trustBundleOf(keysJson) },
      { logKeys: [f.logKey], localLogKeys: [f.logKey] },
    );
    expect((await verify(byKind('policy'))).result.problems).toEqual([]);
  });

  it("a record claiming 'published' whose receipt is the deployment's own log's: RECEIPT_NOT_REMOTE", async () => {
    const lying = edited(byKind('policy'), (r) => {
      Object.assign(r.transparency as object, { backend: 'scrapi', mode: 'published' });
    });
    const bundle = trustBundleOf(keysJson);
    expect(bundle.logKeys.map((k) => k.kid.toString('hex'))).toEqual([f.logKey.kid.toString('hex')]);
    const verify = recordVerifier({ bundle }, { logKeys: [f.logKey], localLogKeys: bundle.logKeys });
    const verdict = await verify(lying);
    expect(verdict.ok).toBe(false);
    expect(verdict.result.problems.map((p) => p.code)).toEqual(['RECEIPT_NOT_REMOTE']);
    // Without knowing the deployment's own keys, the receipt alone cannot say where it was made.
    expect((await recordVerifier({ bundle }, { logKeys: [f.logKey] })(lying)).ok).toBe(true);
  });

  it('a real remote receipt (another log key) claiming published passes', async () => {
    const remote = logSigner();
    const g = await fixture({ claim: { backend: 'scrapi', mode: 'published' }, log: remote });
    const record = [...g.views.values()].find((v) => v.kind === 'policy')!;
    const json = {
      ...keysJson,
      trust_anchors_pem: g.signer.caCertificates.map((c) => c.toString()).join(''),
      signers: [entryJson(g.signer)],
      log_keys: { cose_key_set: encodeKeySet([g.logKey]).toString('base64') },
    };
    const bundle = trustBundleOf(json);
    const verify = recordVerifier(
      { bundle },
      { logKeys: [logKeyOf(remote.publicKey)], localLogKeys: bundle.logKeys },
    );
    expect((await verify(record)).result.problems).toEqual([]);
  });
});

describe("the UI's record checks give the event loop back (issue 28 item 1)", () => {
  it('other work runs while 400 uncached records are checked, and every record gets its state', async () => {
    // Distinct records (a different id each: the cache cannot answer) whose checks cost real
    // signature verifications. A ticker on setImmediate counts the turns other requests would
    // get meanwhile: a check of all records in one go (the page's old way) leaves it none.
    const base = views();
    const records = Array.from({ length: 400 }, (_, i) =>
      edited(base[i % base.length]!, (r) => {
        r.id = `0190a5c8-0000-7000-8000-${String(i).padStart(12, '0')}`;
      }),
    );
    let ticks = 0;
    let checking = true;
    const ticker = (async () => {
      while (checking) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        ticks++;
      }
    })();
    const states = await verifyRecords(records, keysJson, new VerificationCache());
    checking = false;
    await ticker;
    console.log(`[ui-verify] 400 uncached records checked; other work got ${ticks} turns meanwhile`);
    expect(states).toHaveLength(400);
    // Without the slices it is 1 (the turn before the first check); with them one per 5 ms of
    // checking (54 here at 400 ms): 400 signature checks take far more than 20 ms on any machine.
    expect(ticks).toBeGreaterThanOrEqual(4);
  });
});
