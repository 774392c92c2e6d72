import { TlogError } from '../tlog/errors.ts';
import { ed25519NoteVerifier, type NoteVerifier } from '../tlog/note.ts';
import { describeQuorum, logVerifiers, type TlogPolicy } from '../tlog/policy.ts';
import { verifyRecordTlogProof } from '../tlog/record-proof.ts';
import { Paths } from '../export/layout.ts';

/**
 * The bundle verifier's checks of the witnessed-log entries (docs/transparency.md "Witnessed
 * logs", docs/export.md), apart from their entry handlers (entries/tlog.ts) so that they can be
 * tested on hostile input alone:
 *
 * - `tlog/vault.vkeys`: the vault log's note verifier keys as the exporter names them. They are
 *   used only when the caller gives none (`--tlog-key`, a witness policy's `log` lines): a note key
 *   from the bundle proves no more than the bundle does, but the witnesses' cosignatures, checked
 *   with keys only the caller gives, still do.
 * - `attestations/<id>/vault.tlog-proof`: the record's c2sp.org/tlog-proof. Its leaf is recomputed
 *   from the record (envelope.json, docs/chain.md), the index must be the record's position, the
 *   checkpoint must be signed by a vault log key, its witnesses' cosignatures must satisfy the
 *   caller's witness policy, and the inclusion proof must lead from the leaf to its root.
 * - With a witness policy, a record without a proof fails (TLOG_PROOF_MISSING): nothing vouches
 *   that the history it is part of is the one the witnesses saw.
 */

export interface TlogVerifyOptions {
  /** The caller's witness policy (c2sp.org/tlog-policy); without one, no cosignature is required. */
  readonly policy?: TlogPolicy;
  /** Note verifier keys of the vault log the caller trusts (besides the policy's `log` lines). */
  readonly logVkeys?: readonly string[];
}

export interface TlogProblem {
  readonly entry: string;
  readonly code: string;
  readonly message: string;
}

/** TlogError codes as the verifier reports them. */
const CODES: Partial<Record<string, string>> = {
  QUORUM_NOT_MET: 'WITNESS_QUORUM_NOT_MET',
  NOTE_SIGNATURE_INVALID: 'TLOG_CHECKPOINT_INVALID',
  MALFORMED_CHECKPOINT: 'TLOG_CHECKPOINT_INVALID',
  MALFORMED_NOTE: 'TLOG_CHECKPOINT_INVALID',
  ORIGIN_MISMATCH: 'TLOG_CHECKPOINT_INVALID',
  INCLUSION_INVALID: 'TLOG_INCLUSION_INVALID',
  MALFORMED_PROOF: 'TLOG_PROOF_INVALID',
};

export class TlogBundleCheck {
  readonly #options: TlogVerifyOptions;
  readonly #given: NoteVerifier[];
  #bundleKeys: NoteVerifier[] = [];
  #proofs = 0;
  readonly #checkpoints = new Set<string>();

  /** Throws TlogError MALFORMED_VKEY for a caller's key that is not an Ed25519 note key. */
  constructor(options: TlogVerifyOptions = {}) {
    this.#options = options;
    this.#given = [
      ...(options.policy !== undefined ? logVerifiers(options.policy) : []),
      ...(options.logVkeys ?? []).map((v) => ed25519NoteVerifier(v)),
    ];
  }

  /** `tlog/vault.vkeys`. */
  keys(path: string, content: Buffer): TlogProblem[] {
    const problems: TlogProblem[] = [];
    for (const line of content.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        this.#bundleKeys.push(ed25519NoteVerifier(line));
      } catch (err) {
        problems.push({ entry: path, code: 'MALFORMED', message: (err as Error).message });
      }
    }
    return problems;
  }

  /** `attestations/<id>/vault.tlog-proof` of the record `record` (its envelope.json). */
  proof(path: string, record: Record<string, unknown>, content: Buffer): TlogProblem[] {
    const keys = this.#given.length > 0 ? this.#given : this.#bundleKeys;
    if (keys.length === 0) {
      return [
        {
          entry: path,
          code: 'TLOG_KEY_UNKNOWN',
          message: 'no note key of the vault log was given (--tlog-key, a policy log line) or shipped',
        },
      ];
    }
    try {
      const policy = this.#options.policy;
      const v = verifyRecordTlogProof(record, content.toString('utf8'), {
        logVerifiers: keys,
        ...(policy !== undefined ? { policy } : {}),
      });
      this.#proofs++;
      const by =
        policy === undefined
          ? 'no policy witness checked'
          : v.cosigners.length > 0
            ? `cosigned by ${v.cosigners.join(', ')}`
            : 'the policy needs no cosignature';
      this.#checkpoints.add(`${v.checkpoint.origin} size ${v.checkpoint.treeSize} (${by})`);
      return [];
    } catch (err) {
      if (!(err instanceof TlogError)) throw err;
      return [{ entry: path, code: CODES[err.code] ?? err.code, message: err.message }];
    }
  }

  /** When the record `id` closes: with a policy, a record must have had its proof. */
  closed(id: string, hadProof: boolean): TlogProblem[] {
    const policy = this.#options.policy;
    if (hadProof || policy === undefined || policy.quorum.kind === 'none') return [];
    return [
      {
        entry: Paths.tlogProof(id),
        code: 'TLOG_PROOF_MISSING',
        message: `no inclusion proof to a checkpoint the witnesses cosigned (the policy needs ${describeQuorum(policy.quorum)}); export again once a witnessed checkpoint covers the record`,
      },
    ];
  }

  /** Records whose proofs verified, and the checkpoints they led to (for the summary line). */
  summary(): { proofs: number; checkpoints: string[] } {
    return { proofs: this.#proofs, checkpoints: [...this.#checkpoints] };
  }
}
