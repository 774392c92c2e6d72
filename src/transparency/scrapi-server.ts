import type { X509Certificate } from 'node:crypto';
import { encodeCbor } from '../cose/cbor.ts';
import { encodeKeySet } from '../cose/key.ts';
import { TransparencyError } from './errors.ts';
import type { LocalLog } from './local-log.ts';
import { leafHash } from './merkle.ts';
import { entryOf } from './receipt.ts';
import { verifySignedStatement } from './statement.ts';

/**
 * The local log served over SCRAPI, without the transport (src/http/routes/scrapi.ts maps these
 * answers to HTTP): registration policy (the statement must verify: signature by its x5chain
 * leaf, did:x509 `iss` bound to the chain, and, when `trustAnchors` are configured, a chain that
 * leads to one of them), synchronous or background appends, and entry lookups.
 */

export type RegistrationMode =
  | { readonly mode: 'sync' }
  | {
      /**
       * Answer 303 at once and append in the background (how a service that batches behaves).
       * The pending set lives in this process: run it on one replica, or behind sticky routing.
       */
      readonly mode: 'async';
      readonly retryAfterSeconds?: number;
      /** Runs the append; default `setImmediate`. Tests pass a gate to observe the pending state. */
      readonly schedule?: (task: () => Promise<void>) => void;
    };

export interface ScrapiServerOptions {
  readonly log: LocalLog;
  /** Roots a statement's x5chain must lead to; absent = signature and did:x509 binding only. */
  readonly trustAnchors?: readonly X509Certificate[];
  readonly registration?: RegistrationMode;
}

/** A registration's answer: the receipt (201 new, 200 already there), or 303 while it is appended. */
export type Registration =
  | { readonly status: 200 | 201; readonly entryId: string; readonly receipt: Buffer }
  | { readonly status: 303; readonly entryId: string; readonly retryAfterSeconds: number };

/** An entry's answer: its receipt, 302 while a background append runs, or `failed` (once). */
export type EntryLookup =
  | { readonly status: 200; readonly receipt: Buffer }
  | { readonly status: 302; readonly retryAfterSeconds: number }
  | { readonly status: 'failed' };

export interface ScrapiServer {
  /** Throws TransparencyError MALFORMED_STATEMENT (and the statement's own) for a refused one. */
  register(
    statement: unknown,
    onBackgroundError: (err: unknown, entryId: string) => void,
  ): Promise<Registration>;
  /** Throws TransparencyError ENTRY_NOT_FOUND for an unknown id. */
  entry(id: string): Promise<EntryLookup>;
  /** The COSE Key Set of the log key (/.well-known/scitt-keys). */
  keySet(): Buffer;
  /** /.well-known/transparency-configuration, with entries routes under `prefix`. */
  configuration(prefix: string): Buffer;
}

interface Pending {
  state: 'pending' | 'failed';
  error?: string;
}

export function createScrapiServer(options: ScrapiServerOptions): ScrapiServer {
  const { log } = options;
  const registration = options.registration ?? { mode: 'sync' };
  const retryAfterSeconds = registration.mode === 'async' ? (registration.retryAfterSeconds ?? 1) : 1;
  const pending = new Map<string, Pending>();

  return {
    async register(statement, onBackgroundError) {
      if (!Buffer.isBuffer(statement) || statement.length === 0) {
        throw new TransparencyError('MALFORMED_STATEMENT', 'the body is not a COSE_Sign1 statement');
      }
      verifySignedStatement(
        statement,
        options.trustAnchors !== undefined ? { trustAnchors: options.trustAnchors } : {},
      );
      if (registration.mode === 'sync') {
        const result = await log.append(statement);
        return { status: result.created ? 201 : 200, entryId: result.entryId, receipt: result.receipt };
      }
      const entryId = leafHash(entryOf(statement)).toString('hex');
      const existing = await log.getEntry(entryId);
      if (existing !== null) return { status: 200, entryId, receipt: existing.receipt };
      if (pending.get(entryId)?.state !== 'pending') {
        pending.set(entryId, { state: 'pending' });
        const task = async (): Promise<void> => {
          try {
            await log.append(statement);
            pending.delete(entryId);
          } catch (err) {
            onBackgroundError(err, entryId);
            pending.set(entryId, { state: 'failed', error: (err as Error).message });
          }
        };
        (registration.schedule ?? ((t) => void setImmediate(() => void t())))(task);
      }
      return { status: 303, entryId, retryAfterSeconds };
    },

    async entry(id) {
      const entry = await log.getEntry(id);
      if (entry !== null) return { status: 200, receipt: entry.receipt };
      const job = pending.get(id);
      if (job?.state === 'pending') return { status: 302, retryAfterSeconds };
      if (job?.state === 'failed') {
        pending.delete(id);
        return { status: 'failed' };
      }
      throw new TransparencyError('ENTRY_NOT_FOUND', `no entry ${id}`, { retryable: false });
    },

    keySet: () => encodeKeySet(log.keys),

    configuration: (prefix) =>
      encodeCbor(
        new Map<string, unknown>([
          ['issuer', log.issuer],
          ['registration_endpoint', `${prefix}/entries`],
          ['scitt_keys', '/.well-known/scitt-keys'],
          ['verifiable_data_structures', [1]],
        ]),
      ),
  };
}
