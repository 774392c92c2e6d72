import { cosignatureTimestamp, cosignatureVerifier, type WitnessKey } from '../tlog/cosignature.ts';
import { parseNote, parseSignatureLine, type NoteSignature } from '../tlog/note.ts';
import type { WitnessClient } from './client.ts';
import { WitnessError } from './errors.ts';

/**
 * Getting one checkpoint cosigned by one witness (c2sp.org/tlog-witness), the domain side of the
 * wire client: what each answer means for this log.
 *
 * - 200: the witness's cosignature/v1 line must verify with its configured key over this note's
 *   text (other lines are ignored); otherwise the answer is a protocol error, not a cosignature.
 * - 409: the witness holds another size than we thought. When it is at most ours, send again from
 *   its size with the consistency proof from there (a witness reset, a lost cosignature, another
 *   replica's push); at most {@link MAX_CONFLICTS} times. When it is larger than our tree, the
 *   witness has seen more of this log than the log now has: our history lost entries, or another
 *   copy of the log showed it a longer one (`ahead`).
 * - 422: the witness checked our consistency proof against the tree it cosigned and it fails, or
 *   our tree of its size has another root: we showed it a different history (`inconsistent`, the
 *   split view the witness exists to catch).
 * - 400, 403, 404: the witness does not know this log or its key, or refuses the request
 *   (`rejected`: configuration, not misbehaviour).
 */

export const MAX_CONFLICTS = 3;

export interface PushInput {
  readonly client: WitnessClient;
  readonly witness: WitnessKey;
  /** The signed checkpoint note (text, blank line, the log's signature). */
  readonly note: string;
  readonly treeSize: number;
  /** The size this log believes the witness last cosigned (0 when none). */
  readonly knownSize: number;
  /** RFC 9162 consistency proof of this log's tree from `m` to `treeSize`. */
  readonly consistencyProof: (m: number) => Promise<Buffer[]>;
  readonly signal?: AbortSignal;
}

interface Common {
  /** The `old` size of the request the final answer is to. */
  readonly oldSize: number;
  /** Sizes the witness named in 409 answers on the way, in order. */
  readonly conflicts: readonly number[];
}

export type PushOutcome =
  | (Common & { readonly kind: 'cosigned'; readonly signature: NoteSignature; readonly timestamp: bigint })
  | (Common & { readonly kind: 'inconsistent'; readonly status: number; readonly detail: string })
  | (Common & { readonly kind: 'ahead'; readonly witnessSize: number })
  | (Common & { readonly kind: 'rejected'; readonly status: number; readonly detail: string });

export async function pushCheckpoint(input: PushInput): Promise<PushOutcome> {
  const text = parseNote(input.note).text;
  const verifier = cosignatureVerifier(input.witness);
  const conflicts: number[] = [];
  let oldSize = Math.min(Math.max(0, input.knownSize), input.treeSize);
  for (;;) {
    const proof = oldSize === 0 || oldSize === input.treeSize ? [] : await input.consistencyProof(oldSize);
    const answer = await input.client.addCheckpoint({ oldSize, proof, checkpoint: input.note }, input.signal);
    const common = { oldSize, conflicts };
    if (answer.status === 200 && 'lines' in answer) {
      for (const line of answer.lines) {
        const sig = parseSignatureLine(line.replace(/\n$/, ''));
        if (sig.name !== verifier.name || sig.keyId !== verifier.keyId) continue;
        if (!verifier.verify(text, sig.signature)) {
          throw new WitnessError(
            'WITNESS_PROTOCOL',
            `witness ${input.witness.name} answered a cosignature that does not verify with its key`,
          );
        }
        return {
          ...common,
          kind: 'cosigned',
          signature: sig,
          timestamp: cosignatureTimestamp(sig.signature)!,
        };
      }
      throw new WitnessError(
        'WITNESS_PROTOCOL',
        `witness ${input.witness.name} answered 200 without a cosignature of its configured key`,
      );
    }
    if (answer.status === 409 && 'size' in answer) {
      conflicts.push(answer.size);
      if (answer.size > input.treeSize) return { ...common, kind: 'ahead', witnessSize: answer.size };
      if (answer.size === oldSize || conflicts.length > MAX_CONFLICTS) {
        throw new WitnessError(
          'WITNESS_CONFLICT',
          `witness ${input.witness.name} keeps answering 409 (sizes ${conflicts.join(', ')})`,
        );
      }
      oldSize = answer.size;
      continue;
    }
    const detail = 'body' in answer ? answer.body : '';
    if (answer.status === 422) return { ...common, kind: 'inconsistent', status: 422, detail };
    return { ...common, kind: 'rejected', status: answer.status, detail };
  }
}
