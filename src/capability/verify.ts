import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  canonicalJson,
  verifyRecord,
  type CapabilityPredicate,
  type JsonObject,
  type Trust,
} from '../attest/index.ts';
import { PredicateTypes } from '../attest/index.ts';
import { algorithmOf, keyIdOf } from '../signing/signer.ts';
import { readBiscuit, blocksNarrow } from './biscuit.ts';
import { chainProblems, type ChainLink } from './chain.ts';
import { CapabilityError, type CapabilityErrorCode } from './errors.ts';
import { verifyCredential } from './vc.ts';
import { chainView, viewOf } from './view.ts';

/**
 * Offline verification of the capability chains attached to an envelope (`capability_chain`,
 * `capability_tokens`), the one entry point for `service-ctl verify` and the export-bundle
 * verifier: {@link verifyCapabilities}. What it checks, per chain:
 *
 * 1. the envelope itself verifies under the trusted keys (attest/verify.ts), and the chain is the
 *    signed one: a capability record's own predicate (chain and root); a step record's chains come
 *    from its tokens, each signed by the same key;
 * 2. the chain is well formed and never widens (chain.ts): SCOPE_WIDENED, SCOPE_INVALID,
 *    PRINCIPAL_INVALID;
 * 3. every token: the VC verifies under the envelope's key (`kid` = the record's key id; another
 *    namespace's key is TOKEN_UNTRUSTED), the Biscuit's signature chain under the Biscuit root the
 *    signed record names, and both say exactly the signed chain (links, approvals, step, this
 *    record among their evidence): TOKEN_MISMATCH otherwise; the Biscuit's attenuation blocks only
 *    narrow;
 * 4. the approval: each link's approver is present, the same, in the chain and in every token
 *    (a link without one reads "no approval required");
 * 5. every served chain view (`capability_chain[]`, unsigned: what the UI and humans read) says
 *    exactly what is signed: on a capability record, its predicate's chain (chainView);
 *    on a step record, the VC of the same capability, and a view no verified VC backs is a
 *    mismatch too (CHAIN_MISMATCH). A step with chain views but no `capability_tokens` (absent or
 *    empty) cannot be checked: TOKENS_MISSING.
 *
 * Token validity is checked at the record's time (the tokens were issued with it), so an archive
 * verifies after the tokens expire; the query endpoint is what refuses expired tokens.
 */

export type CapabilityProblemCode =
  | CapabilityErrorCode
  | 'ENVELOPE_UNVERIFIED'
  | 'TOKENS_MISSING'
  /** A served `capability_chain[]` view differs from the signed chain (or nothing signed backs it). */
  | 'CHAIN_MISMATCH';

export interface CapabilityProblem {
  readonly code: CapabilityProblemCode;
  readonly message: string;
}

/** One chain as verified: who approved which step under which scope. */
export interface VerifiedChain {
  readonly capability: string;
  readonly step: string;
  readonly scope: string;
  readonly links: readonly ChainLink[];
  readonly rootKeyId: string | null;
  readonly tokens: readonly string[];
}

export interface CapabilityReport {
  readonly ok: boolean;
  readonly problems: CapabilityProblem[];
  readonly chains: VerifiedChain[];
  /** One line per chain: `step <run>:<step> under <scope>: granted by … approved by …`. */
  readonly lines: string[];
}

interface Token {
  format: string;
  id?: string;
  token: string;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Human line for a chain. */
export function describeChain(c: VerifiedChain): string {
  const hops = c.links
    .map(
      (l) =>
        `${l.scope} granted by ${l.grantedBy}, ${l.approvedBy === null ? 'no approval required' : `approved by ${l.approvedBy}`}`,
    )
    .join(' → ');
  const tokens = c.tokens.length > 0 ? `; ${c.tokens.join(', ')} verified` : '';
  return `${c.step} under ${c.scope}: ${hops} (root ${c.rootKeyId ?? 'unrecorded'}${tokens})`;
}

const sameLinks = (a: readonly ChainLink[], b: readonly ChainLink[]): boolean =>
  a.length === b.length &&
  a.every(
    (l, i) => l.scope === b[i]!.scope && l.grantedBy === b[i]!.grantedBy && l.approvedBy === b[i]!.approvedBy,
  );

/** A string member, or null (anything else is not what we signed and fails the comparison). */
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function linksOfSubject(subject: Record<string, unknown>): ChainLink[] {
  const d = Array.isArray(subject.delegations) ? subject.delegations : [];
  return d.filter(isObject).map((l) => ({
    scope: str(l.scope) ?? '',
    grantedBy: str(l.grantedBy) ?? '',
    approvedBy: str(l.approvedBy),
  }));
}

/** Canonical JSON of a view, or undefined when it is not JSON (it then equals nothing signed). */
function canonical(v: unknown): string | undefined {
  try {
    return canonicalJson(v);
  } catch {
    return undefined;
  }
}

/**
 * Whether a served view says exactly `expected` (chainView of the signed chain). A view with
 * `root: null` is what the API serves for capability records stored before views were kept
 * (src/http/views/envelope.ts `chainsOf`): it claims no root, so only its other members are compared.
 */
function sameView(view: unknown, expected: JsonObject): boolean {
  if (!isObject(view)) return false;
  const want = view.root === null ? { ...expected, root: null } : expected;
  const got = canonical(view);
  return got !== undefined && got === canonical(want);
}

/**
 * Verifies the capability chains of one API record (see the module comment). Records of other
 * kinds, or without chains, give an ok report with no chains. Never throws for bad input.
 */
export async function verifyCapabilities(record: unknown, trust: Trust): Promise<CapabilityReport> {
  const problems: CapabilityProblem[] = [];
  const chains: VerifiedChain[] = [];
  const report = (): CapabilityReport => ({
    ok: problems.length === 0,
    problems,
    chains,
    lines: chains.map(describeChain),
  });
  if (!isObject(record)) return report();
  const kind = record.kind;
  const tokens = (Array.isArray(record.capability_tokens) ? record.capability_tokens : []).filter(
    (t): t is Token => isObject(t) && typeof t.format === 'string' && typeof t.token === 'string',
  );
  // Other kinds carry no chain: skip them before paying for a second signature check.
  if (typeof kind === 'string' && kind !== 'capability' && kind !== 'step') return report();
  const statementOf = verifyRecord(record, trust);
  const isCapability =
    kind === 'capability' || statementOf.statement?.predicateType === PredicateTypes.capability;
  if (!isCapability && kind !== 'step') return report();
  if (!statementOf.ok || statementOf.statement === undefined) {
    problems.push({
      code: 'ENVELOPE_UNVERIFIED',
      message: 'the envelope does not verify, so its capability chain cannot be trusted',
    });
    return report();
  }
  const keys: KeyObject[] =
    'publicKeys' in trust
      ? trust.publicKeys.map((k) => (k.type === 'private' ? createPublicKey(k) : k))
      : trust.certificateChain.slice(0, 1).map((c) => c.publicKey);
  const envelopeKeys = keys;
  const recordKeyId = statementOf.keyId ?? null;
  const recordId = typeof record.id === 'string' ? record.id : undefined;
  const createdAt = typeof record.created_at === 'string' ? new Date(record.created_at) : null;
  const fail = (code: CapabilityProblemCode, message: string) => problems.push({ code, message });

  /** Checks one token against the signed chain; returns its label when it verified. */
  const checkToken = async (
    t: Token,
    expected: {
      capability: string;
      step: string;
      links: readonly ChainLink[];
      biscuitRootKey: string | null;
    },
  ): Promise<
    | {
        label: string;
        biscuitRootKey?: string;
        authority?: string;
        links?: ChainLink[];
        capability?: string;
      }
    | undefined
  > => {
    try {
      if (t.format === 'vc+jwt') {
        const vc = verifyCredential(t.token, envelopeKeys, createdAt);
        if (vc.keyId !== recordKeyId)
          throw new CapabilityError(
            'TOKEN_UNTRUSTED',
            `VC signed by ${vc.keyId}, the envelope by ${String(recordKeyId)}: not the chain's root`,
          );
        const subject = isObject(vc.claims.credentialSubject) ? vc.claims.credentialSubject : {};
        const links = linksOfSubject(subject);
        const evidence = (Array.isArray(vc.claims.evidence) ? vc.claims.evidence : [])
          .filter(isObject)
          .map((e) => String(e.id));
        if (recordId !== undefined && !evidence.includes(`urn:uuid:${recordId}`))
          throw new CapabilityError('TOKEN_MISMATCH', `VC evidence does not name record ${recordId}`);
        if (expected.links.length > 0 && !sameLinks(links, expected.links))
          throw new CapabilityError('TOKEN_MISMATCH', 'VC delegations differ from the signed chain');
        if (expected.capability !== '' && subject.capability !== expected.capability)
          throw new CapabilityError('TOKEN_MISMATCH', `VC is about ${String(subject.capability)}`);
        const widened = chainProblems(links).find((p) => p.code === 'SCOPE_WIDENED');
        if (widened) throw widened;
        const root = isObject(subject.root) ? subject.root : {};
        return {
          label: 'vc+jwt',
          links,
          capability: String(subject.capability),
          ...(typeof root.biscuitRootKey === 'string' ? { biscuitRootKey: root.biscuitRootKey } : {}),
          ...(typeof root.authority === 'string' ? { authority: root.authority } : {}),
        };
      }
      if (t.format === 'biscuit') {
        if (expected.biscuitRootKey === null)
          throw new CapabilityError(
            'TOKEN_UNTRUSTED',
            'no signed Biscuit root key to verify the Biscuit with',
          );
        const b = await readBiscuit(t.token, expected.biscuitRootKey);
        if (!blocksNarrow(b.blocks))
          throw new CapabilityError(
            'SCOPE_WIDENED',
            'a Biscuit attenuation block widens the scope before it',
          );
        if (!sameLinks(b.claims.links, expected.links) || !sameLinks(b.blocks as ChainLink[], expected.links))
          throw new CapabilityError(
            'TOKEN_MISMATCH',
            'Biscuit delegations or blocks differ from the signed chain',
          );
        if (b.claims.capability !== expected.capability || b.claims.step !== expected.step)
          throw new CapabilityError('TOKEN_MISMATCH', `Biscuit is about ${b.claims.capability}`);
        if (recordId !== undefined && !b.claims.attestations.includes(recordId))
          throw new CapabilityError(
            'TOKEN_MISMATCH',
            `Biscuit attestation facts do not name record ${recordId}`,
          );
        if (createdAt !== null && b.claims.validUntil !== null && b.claims.validUntil < createdAt)
          throw new CapabilityError('TOKEN_EXPIRED', 'Biscuit expired before its record was made');
        return { label: 'biscuit' };
      }
      fail('TOKEN_MALFORMED', `unknown token format ${t.format}`);
    } catch (err) {
      if (err instanceof CapabilityError) fail(err.code, `${t.format}: ${err.message}`);
      else fail('TOKEN_MALFORMED', `${t.format}: ${String(err)}`);
    }
    return undefined;
  };

  if (isCapability) {
    const p = statementOf.statement.predicate as CapabilityPredicate;
    for (const e of chainProblems(p.chain)) fail(e.code, e.message);
    const capability = `capability:${p.runId}:${p.stepId}:${p.index}`;
    const step = `step:${p.runId}:${p.stepId}`;
    if (p.root !== undefined && p.root.keyId !== recordKeyId)
      fail(
        'TOKEN_UNTRUSTED',
        `the chain names root ${p.root.keyId} but the envelope is signed by ${String(recordKeyId)}`,
      );
    const expectedView = chainView(p);
    const served = record.capability_chain;
    if (served !== undefined && served !== null) {
      if (!Array.isArray(served) || served.length > 1)
        fail('CHAIN_MISMATCH', 'a capability record serves exactly its own chain view');
      else if (served.length === 1 && !sameView(served[0], expectedView))
        fail('CHAIN_MISMATCH', `capability_chain of ${capability} differs from its signed predicate`);
    }
    const verified: string[] = [];
    for (const t of tokens) {
      const ok = await checkToken(t, {
        capability,
        step,
        links: p.chain,
        biscuitRootKey: p.root?.biscuitRootKey ?? null,
      });
      if (ok) verified.push(ok.label);
    }
    chains.push({
      capability,
      step,
      scope: p.chain.at(-1)?.scope ?? '',
      links: p.chain,
      rootKeyId: p.root?.keyId ?? null,
      tokens: verified,
    });
    return report();
  }

  // A step record: its chains are what its VCs (signed by the envelope's key) say; each Biscuit is
  // checked against the chain and Biscuit root of the VC of the same capability.
  const vcs = tokens.filter((t) => t.format === 'vc+jwt');
  const biscuits = tokens.filter((t) => t.format === 'biscuit');
  const stepSubject = `step:${String(record.run_id)}:${String(record.step_id)}`;
  const served = record.capability_chain;
  if (served !== undefined && served !== null && !Array.isArray(served))
    fail('CHAIN_MISMATCH', 'capability_chain is not a list');
  const views: unknown[] = Array.isArray(served) ? served : [];
  // No VC to check the views with. An empty token list is a record that should have tokens and
  // lost them: TOKENS_MISSING. An absent one is what SERVICE_CAPABILITY_TOKENS=0 serves (the field
  // removed on every record): the step's views are then not checked here and no CHAIN line vouches
  // for them (the capability records carry the signed chains, checked against their predicates).
  // Failing it would make every export of such a deployment unverifiable.
  if (views.length > 0 && vcs.length === 0 && record.capability_tokens !== undefined)
    fail('TOKENS_MISSING', `${views.length} chain(s) but no VC to verify them with`);
  /** Views a verified VC backs (by index); every other view is reported after the loop. */
  const backed = new Set<number>();
  const envelopeKey = keys.find((k) => keyIdOf(k) === recordKeyId);
  const algorithm = envelopeKey !== undefined ? (algorithmOf(envelopeKey) ?? null) : null;
  for (const vc of vcs) {
    const ok = await checkToken(vc, { capability: '', step: stepSubject, links: [], biscuitRootKey: null });
    if (ok === undefined || ok.links === undefined || ok.capability === undefined) continue;
    for (const e of chainProblems(ok.links)) fail(e.code, e.message);
    // The view the VC backs: what chainView makes of the chain the VC signs (its root is the
    // envelope's key, which signed the VC, with the Biscuit root the VC vouches for).
    const expected = viewOf({
      capability: ok.capability,
      step: stepSubject,
      root: {
        authority: ok.authority ?? null,
        key_id: recordKeyId,
        algorithm,
        biscuit_root_key: ok.biscuitRootKey ?? null,
      },
      links: ok.links,
    });
    const at = views.findIndex((v, i) => !backed.has(i) && isObject(v) && v.capability === ok.capability);
    if (at < 0 || !sameView(views[at], expected))
      fail('TOKEN_MISMATCH', `capability_chain of ${ok.capability} differs from its signed VC`);
    if (at >= 0) backed.add(at);
    const labels = [ok.label];
    let matched = false;
    for (const b of biscuits) {
      try {
        const parsed = await readBiscuit(b.token, ok.biscuitRootKey ?? '');
        if (parsed.claims.capability !== ok.capability) continue;
        const checked = await checkToken(b, {
          capability: ok.capability,
          step: stepSubject,
          links: ok.links,
          biscuitRootKey: ok.biscuitRootKey ?? null,
        });
        if (checked) labels.push(checked.label);
        matched = true;
      } catch {
        /* another capability's Biscuit, or one that fails: reported below when none matches */
      }
    }
    if (!matched && biscuits.length > 0)
      fail(
        'TOKEN_UNTRUSTED',
        `no Biscuit of ${ok.capability} verifies under its signed root ${String(ok.biscuitRootKey)}`,
      );
    chains.push({
      capability: ok.capability,
      step: stepSubject,
      scope: ok.links.at(-1)?.scope ?? '',
      links: ok.links,
      rootKeyId: recordKeyId,
      tokens: labels,
    });
  }
  // A view no verified VC backs: reported unless a VC failed (or there is none: TOKENS_MISSING),
  // whose problem already fails the record and is the likelier cause.
  const vcFailed = chains.length < vcs.length;
  views.forEach((v, i) => {
    if (backed.has(i) || vcs.length === 0 || vcFailed) return;
    const name = isObject(v) && typeof v.capability === 'string' ? v.capability : `#${i + 1}`;
    fail('CHAIN_MISMATCH', `capability_chain of ${name} has no verified VC of its capability`);
  });
  return report();
}
