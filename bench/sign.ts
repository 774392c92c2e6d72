/**
 * sign: the project's signing path over a prepared in-toto statement vs raw `crypto.sign` over the
 * same PAE bytes with the same KeyObject, for ECDSA P-256 and Ed25519. Goal ≥ 0.8×.
 *
 * Cases (each a throughput in ops per CPU-second of this process, on one thread):
 * - baseline        `crypto.sign(digest, pae, key)`
 * - signer.sign     the Signer wrapper over the same PAE bytes
 * - PAE + sign      `preAuthEncoding(type, payload)` then `signer.sign`
 * - floors (info)   `JSON.stringify` + PAE + `crypto.sign` + both base64s, the least a statement →
 *                   envelope path does (no JCS check), and that plus one SHA-256 over the text: the
 *                   most signStatement and sealStatement can reach on this machine
 * - signStatement   statement → canonical JSON payload → PAE → sign → DSSE envelope (base64)
 * - sealStatement   signStatement + envelope digest + signature metadata (what the vault stores)
 *
 * Rounds alternate the cases (rotating their order), and each case's ratio is the median over
 * rounds of its rate divided by the baseline's rate in the same round. Rates are per CPU-second
 * (process.cpuUsage) rather than per wall-clock second: the loops are CPU-bound and synchronous,
 * and on a shared 2-vCPU box time spent descheduled would otherwise dominate the noise. Short
 * slices, many rounds: both sides of a pair see nearly the same machine state.
 */
import { hash, sign as cryptoSign, type KeyObject } from 'node:crypto';
import {
  IN_TOTO_PAYLOAD_TYPE,
  preAuthEncoding,
  sealStatement,
  signStatement,
  statementPayload,
} from '../src/attest/index.ts';
import { inTotoPreAuthEncodingOfText } from '../src/attest/pae.ts';
import { generateDevPki } from '../hack/dev-pki.ts';
import {
  createKeySigner,
  digestOf,
  parseCertificates,
  parsePrivateKey,
  type SignatureAlgorithm,
  type Signer,
} from '../src/signing/index.ts';
import {
  fmtRate,
  fmtRatio,
  goalText,
  median,
  printTable,
  scaled,
  verdict,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { statementFor } from './records.ts';

const GOAL: Goal = { op: '>=', value: 0.8 };
const ROUNDS = 21;

interface Case {
  readonly name: string;
  /** One operation; returns a byte so the work cannot be optimised away. */
  readonly op: () => number;
  /** A reference row without a goal (no verdict, not in the summary). */
  readonly info?: boolean;
}

/** Runs `op` in a tight loop for about `ms` milliseconds of wall time; returns ops per CPU-second. */
function rate(op: () => number, ms: number): { perSecond: number; sink: number } {
  let n = 0;
  let sink = 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  do {
    sink ^= op();
    n += 1;
  } while (performance.now() - t0 < ms);
  const cpu = process.cpuUsage(cpu0);
  return { perSecond: (n * 1e6) / (cpu.user + cpu.system), sink };
}

async function material(algorithm: SignatureAlgorithm): Promise<{ key: KeyObject; signer: Signer }> {
  const pki = await generateDevPki({ leafAlgorithm: algorithm });
  // Parsed once here so the baseline and the signer share the very same KeyObject.
  const key = parsePrivateKey(pki['tls.key'], 'tls.key');
  const signer = createKeySigner({
    privateKey: key,
    certificateChain: parseCertificates(pki['tls.crt'], 'tls.crt'),
    caCertificates: parseCertificates(pki['ca.crt'], 'ca.crt'),
  });
  return { key, signer };
}

/** The floor cases' envelope text: JSON.stringify, PAE, crypto.sign, base64 (nothing checked). */
function floorEnvelope(statement: object, digest: string | null, key: KeyObject): string {
  const { pae, payload } = inTotoPreAuthEncodingOfText(JSON.stringify(statement), true);
  const sig = cryptoSign(digest, pae, key);
  return `${payload.toString('base64')}${sig.toString('base64')}`;
}

const first = (b: Buffer | string): number => (typeof b === 'string' ? b.charCodeAt(0) : b[0]!);

export const signBenchmark: Benchmark = {
  name: 'sign',
  title: 'DSSE signing path vs raw crypto.sign over the same PAE bytes (ECDSA P-256, Ed25519)',
  async run(ctx) {
    const roundMs = scaled(120, ctx.scale, 40, 600);
    // A model-step statement as the controller makes it (~1 KB canonical payload).
    const { statement } = statementFor(
      {
        namespace: 'bench',
        runId: '0190a6c0-0000-7000-8000-000000000001',
        pack: { name: 'baseline', version: '1.0.0' },
      },
      1,
    );
    const payload = statementPayload(statement);
    const pae = preAuthEncoding(IN_TOTO_PAYLOAD_TYPE, payload);
    const rows: string[][] = [];
    const summary: SummaryRow[] = [];
    let sink = 0;
    for (const [label, algorithm] of [
      ['ECDSA P-256', 'ECDSA_P256_SHA256'],
      ['Ed25519', 'ED25519'],
    ] as const) {
      const { key, signer } = await material(algorithm);
      const digest = digestOf(algorithm);
      const baseline: Case = {
        name: 'crypto.sign (baseline)',
        op: () => first(cryptoSign(digest, pae, key)),
      };
      const cases: Case[] = [
        { name: 'signer.sign(PAE)', op: () => first(signer.sign(pae)) },
        {
          name: 'preAuthEncoding + signer.sign',
          op: () => first(signer.sign(preAuthEncoding(IN_TOTO_PAYLOAD_TYPE, payload))),
        },
        {
          // The least any statement → envelope path does on this key: plain JSON.stringify (no JCS
          // check), the PAE, the signature, both base64s. Informational: it bounds what
          // signStatement can reach here (docs/bench.md, "the floor of the seal path").
          name: 'floor of signStatement (info)',
          info: true,
          op: () => floorEnvelope(statement, digest, key).length,
        },
        {
          // …plus one SHA-256 over the envelope's text: the bound for sealStatement, whose digest
          // (docs/digest.md) is a SHA-256 over the envelope's JCS, no shorter than this.
          name: 'floor of sealStatement (info)',
          info: true,
          op: () => first(hash('sha256', floorEnvelope(statement, digest, key), 'hex')),
        },
        { name: 'signStatement', op: () => first(signStatement(statement, signer).signatures[0]!.sig) },
        { name: 'sealStatement', op: () => first(sealStatement(statement, signer).digest) },
      ];
      ctx.log(`sign: ${label}, ${ROUNDS} rounds × ${cases.length + 1} cases × ${roundMs} ms`);
      // Warm up every path (JIT, OpenSSL contexts) before measuring.
      for (const c of [baseline, ...cases]) sink ^= rate(c.op, Math.min(200, roundMs)).sink;
      const baseRates: number[] = [];
      const caseRates = cases.map(() => [] as number[]);
      const ratios = cases.map(() => [] as number[]);
      for (let r = 0; r < ROUNDS; r++) {
        ctx.throwIfStopping();
        // Rotate the order so no case always runs right after another (thermal/scheduler bias).
        const order = [-1, ...cases.map((_, i) => i)];
        const shift = r % order.length;
        const rotated = [...order.slice(shift), ...order.slice(0, shift)];
        const got = new Map<number, number>();
        for (const idx of rotated) {
          const c = idx < 0 ? baseline : cases[idx]!;
          const m = rate(c.op, roundMs);
          sink ^= m.sink;
          got.set(idx, m.perSecond);
        }
        const b = got.get(-1)!;
        baseRates.push(b);
        cases.forEach((_, i) => {
          caseRates[i]!.push(got.get(i)!);
          ratios[i]!.push(got.get(i)! / b);
        });
      }
      const b = median(baseRates);
      rows.push([label, baseline.name, fmtRate(b), fmtRate(b), '1.00×', '', '']);
      cases.forEach((c, i) => {
        const ratio = median(ratios[i]!);
        rows.push([
          label,
          c.name,
          fmtRate(median(caseRates[i]!)),
          fmtRate(b),
          fmtRatio(ratio),
          c.info === true ? '(info)' : goalText(GOAL),
          c.info === true ? '' : verdict(ratio, GOAL),
        ]);
        // The goal's row ("the signing path against raw crypto.sign over the same PAE bytes"),
        // then the whole statement → envelope (→ digest) paths, which add canonical JSON.
        if (
          c.name === 'preAuthEncoding + signer.sign' ||
          c.name === 'signStatement' ||
          c.name === 'sealStatement'
        ) {
          summary.push({
            benchmark: 'sign',
            case: `${label} ${c.name === 'preAuthEncoding + signer.sign' ? 'signing path (PAE + sign)' : c.name}`,
            ratioOf: 'ops/CPU-s ÷ crypto.sign ops/CPU-s',
            ratio,
            goal: GOAL,
          });
        }
      });
    }
    printTable(
      `sign — ops per CPU-second, one thread, median of ${ROUNDS} rotating rounds × ${roundMs} ms ` +
        `(payload ${payload.length} B, PAE ${pae.length} B)`,
      ['algorithm', 'case', 'ops/CPU-s', 'baseline ops/CPU-s', 'ratio', 'goal', 'verdict'],
      rows,
    );
    if (sink === 0.5) console.log(''); // keeps `sink` observable
    return summary;
  },
};
