/**
 * formats: the project's hand-written encoders against the well-kept libraries they stand in for,
 * each beside the operation of the goal it serves (docs/adr/0006 keeps them only because of that):
 *
 * - receipts of one commit batch (256 entries under one signed tree head): `receiptsUnder`, CBOR
 *   heads written into one buffer, vs cbor-x encoding each receipt; and the log entry of a
 *   statement, `sign1Entry` (a checked copy) vs re-encoding it with cbor-x. Reference: the
 *   transparency benchmark's ceiling op, leafHash + crypto.sign of a receipt's Sig_structure.
 * - RFC 8785 JSON of a model-step statement (the DSSE payload) and of its envelope (the vault
 *   digest): `canonicalJson` / `envelopeJcs` vs the `canonicalize` package. Reference: the sign
 *   benchmark's baseline, crypto.sign (ECDSA P-256) over the statement's PAE bytes.
 *
 * Every pair is checked to produce the same bytes before it is timed. Costs are CPU µs per
 * operation (process.cpuUsage), median of rotating rounds; no goal of its own (informational).
 */
import { sign as cryptoSign } from 'node:crypto';
import canonicalize from 'canonicalize';
import {
  canonicalJson,
  IN_TOTO_PAYLOAD_TYPE,
  preAuthEncoding,
  signStatement,
  statementPayload,
} from '../src/attest/index.ts';
import { envelopeJcs } from '../src/attest/digest.ts';
import { cborUint, encodeCbor, Tag } from '../src/cose/cbor.ts';
import { encodeSign1, Header, sigStructure } from '../src/cose/sign1.ts';
import { leafHash } from '../src/transparency/merkle.ts';
import {
  receiptsUnder,
  sign1Entry,
  signTreeHead,
  VDP_INCLUSION,
  type InclusionProof,
} from '../src/transparency/receipt.ts';
import { buildSignedStatement, decodeSign1 } from '../src/transparency/statement.ts';
import { fmtRatio, median, printTable, scaled, type Benchmark } from './common.ts';
import { statementFor } from './records.ts';
import { material } from './transparency.ts';

const ROUNDS = 15;
/** Commit batch of the transparency goal's row (256 clients). */
const BATCH = 256;

interface Op {
  readonly name: string;
  /** Operations one call performs (a receipt batch is BATCH receipts). */
  readonly per: number;
  readonly run: () => unknown;
}

/** CPU µs per operation of `op` over about `ms` of wall time. */
function cpuMicros(op: Op, ms: number): number {
  let calls = 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  do {
    op.run();
    calls += 1;
  } while (performance.now() - t0 < ms);
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / (calls * op.per);
}

function same(a: Buffer | string, b: Buffer | string | undefined, what: string): void {
  const equal = typeof a === 'string' ? a === b : Buffer.isBuffer(b) && a.equals(b);
  if (!equal) throw new Error(`${what}: the hand-written and the library output differ`);
}

export const formatsBenchmark: Benchmark = {
  name: 'formats',
  title: 'hand-written CBOR/JCS encoders vs cbor-x / canonicalize, beside the goal op each serves',
  async run(ctx) {
    const roundMs = scaled(150, ctx.scale, 40, 1000);
    // The transparency benchmark's key: the service signer, which is also the log key.
    const { key, signer } = await material();
    const { statement } = statementFor(
      {
        namespace: 'bench',
        runId: '0190a6c0-0000-7000-8000-000000000001',
        pack: { name: 'baseline', version: '1.0.0' },
      },
      1,
    );
    const envelope = signStatement(statement, signer);
    const pae = preAuthEncoding(IN_TOTO_PAYLOAD_TYPE, statementPayload(statement));

    // A statement as the publisher builds it, and 256 proofs into a log of ~176k entries (18 hashes).
    const scitt = buildSignedStatement({
      attestationId: '0190a6c0-0000-7000-8000-0000000000aa',
      envelope,
      signer,
      caCertificates: signer.caCertificates,
    });
    const parsed = decodeSign1(scitt.bytes, 'MALFORMED_STATEMENT');
    const root = leafHash(Buffer.from('root'));
    const head = signTreeHead({ signer, issuer: 'aibom-vault', root, issuedAt: 1_700_000_000 });
    const proofs: InclusionProof[] = Array.from({ length: BATCH }, (_, i) => ({
      treeSize: 176_250,
      leafIndex: 176_000 + i,
      path: Array.from({ length: 18 }, (_, j) => leafHash(Buffer.from(`${i}/${j}`))),
    }));
    const receiptsByLibrary = (): Buffer[] =>
      proofs.map((p) =>
        encodeCbor(
          new Tag(
            [
              head.signed.protectedBytes,
              new Map([
                [
                  Header.vdp,
                  new Map([
                    [VDP_INCLUSION, [encodeCbor([cborUint(p.treeSize), cborUint(p.leafIndex), p.path])]],
                  ]),
                ],
              ]),
              null,
              head.signed.signature,
            ],
            18,
          ),
        ),
      );
    const byHand = receiptsUnder(head, proofs);
    receiptsByLibrary().forEach((r, i) => same(byHand[i]!, r, 'receipt'));
    same(sign1Entry(scitt.bytes, parsed), encodeSign1(parsed, new Map()), 'log entry');
    const jcs = (v: unknown): string => canonicalize(v) as string;
    same(canonicalJson(statement), jcs(statement), 'statement JCS');
    same(envelopeJcs(envelope)!, jcs(envelope), 'envelope JCS');

    const receiptSig = sigStructure(head.signed.protectedBytes, root);
    const references: Record<'scitt' | 'sign', Op> = {
      scitt: {
        name: 'leafHash + crypto.sign(receipt Sig_structure)',
        per: 1,
        run: () => [leafHash(scitt.bytes), cryptoSign('sha256', receiptSig, key)],
      },
      sign: { name: 'crypto.sign(PAE), ECDSA P-256', per: 1, run: () => cryptoSign('sha256', pae, key) },
    };
    const pairs: { goal: 'scitt' | 'sign'; own: Op; library: Op }[] = [
      {
        goal: 'scitt',
        own: {
          name: `receiptsUnder (${BATCH} receipts, one buffer)`,
          per: BATCH,
          run: () => receiptsUnder(head, proofs),
        },
        library: { name: 'cbor-x, one receipt at a time', per: BATCH, run: receiptsByLibrary },
      },
      {
        goal: 'scitt',
        own: { name: 'sign1Entry (checked copy)', per: 1, run: () => sign1Entry(scitt.bytes, parsed) },
        library: { name: 'cbor-x re-encoding', per: 1, run: () => encodeSign1(parsed, new Map()) },
      },
      {
        goal: 'sign',
        own: { name: 'canonicalJson(statement)', per: 1, run: () => canonicalJson(statement) },
        library: { name: 'canonicalize(statement)', per: 1, run: () => jcs(statement) },
      },
      {
        goal: 'sign',
        own: { name: 'envelopeJcs(envelope)', per: 1, run: () => envelopeJcs(envelope) },
        library: { name: 'canonicalize(envelope)', per: 1, run: () => jcs(envelope) },
      },
    ];
    const ops = [references.scitt, references.sign, ...pairs.flatMap((p) => [p.own, p.library])];
    ctx.log(`formats: ${ROUNDS} rounds × ${ops.length} ops × ${roundMs} ms`);
    for (const op of ops) cpuMicros(op, Math.min(100, roundMs)); // warm-up (JIT, OpenSSL contexts)
    const samples = new Map<Op, number[]>(ops.map((op) => [op, []]));
    for (let r = 0; r < ROUNDS; r++) {
      ctx.throwIfStopping();
      const shift = r % ops.length;
      for (const op of [...ops.slice(shift), ...ops.slice(0, shift)])
        samples.get(op)!.push(cpuMicros(op, roundMs));
    }
    const us = (op: Op): number => median(samples.get(op)!);
    const fmt = (v: number): string => `${v.toFixed(2)} µs`;
    const rows = pairs.map(({ goal, own, library }) => {
      const reference = references[goal];
      const added = us(library) - us(own);
      return [
        own.name,
        fmt(us(own)),
        library.name,
        fmt(us(library)),
        fmtRatio(us(library) / us(own)),
        fmt(added),
        `${reference.name} ${fmt(us(reference))}`,
        `${((100 * added) / us(reference)).toFixed(0)}%`,
      ];
    });
    printTable(
      `formats — CPU µs per operation, median of ${ROUNDS} rotating rounds × ${roundMs} ms ` +
        `(statement ${scitt.bytes.length} B, ${BATCH} inclusion proofs of 18 hashes, payload ${statementPayload(statement).length} B)`,
      [
        'hand-written',
        'µs/op',
        'library',
        'µs/op',
        'library ÷ own',
        'library adds',
        'reference op (the goal’s baseline)',
        'added ÷ reference',
      ],
      rows,
    );
    return [];
  },
};
