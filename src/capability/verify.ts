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

/** What a record's tokens are checked against: its trusted key, id and time. */
interface RecordContext {
  readonly keys: readonly KeyObject[];
  readonly recordKeyId: string | null;
  readonly recordId: string | undefined;
  readonly createdAt: Date | null;
}

/** The signed chain a token must say. `capability` '' and `links` []: not known yet (a step's VC). */
interface Expected {
  readonly capability: string;
  readonly step: string;
  readonly links: readonly ChainLink[];
  readonly biscuitRootKey: string | null;
}

/** What a token that verified says. */
interface CheckedToken {
  readonly label: string;
  readonly biscuitRootKey?: string;
  readonly authority?: string;
  readonly links?: ChainLink[];
  readonly capability?: string;
}

/** The problems of one record, and the chains that verified. */
class Findings {
  readonly problems: CapabilityProblem[] = [];
  readonly chains: VerifiedChain[] = [];
  fail(code: CapabilityProblemCode, message: string): void {
    this.problems.push({ code, message });
  }
  report(): CapabilityReport {
    return {
      ok: this.problems.length === 0,
      problems: this.problems,
      chains: this.chains,
      lines: this.chains.map(describeChain),
    };
  }
}

/** A VC-JWT: signed by the envelope's key, about this record, saying the expected chain. Throws. */
function checkVc(t: Token, expected: Expected, ctx: RecordContext): CheckedToken {
  const vc = verifyCredential(t.token, ctx.keys, ctx.createdAt);
  if (vc.keyId !== ctx.recordKeyId)
    throw new CapabilityError(
      'TOKEN_UNTRUSTED',
      `VC signed by ${vc.keyId}, the envelope by ${String(ctx.recordKeyId)}: not the chain's root`,
    );
  const subject = isObject(vc.claims.credentialSubject) ? vc.claims.credentialSubject : {};
  const links = linksOfSubject(subject);
  const evidence = (Array.isArray(vc.claims.evidence) ? vc.claims.evidence : [])
    .filter(isObject)
    .map((e) => String(e.id));
  if (ctx.recordId !== undefined && !evidence.includes(`urn:uuid:${ctx.recordId}`))
    throw new CapabilityError('TOKEN_MISMATCH', `VC evidence does not name record ${ctx.recordId}`);
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

/** A Biscuit: under the signed root, only narrowing, saying the expected chain. Throws. */
async function checkBiscuit(t: Token, expected: Expected, ctx: RecordContext): Promise<CheckedToken> {
  if (expected.biscuitRootKey === null)
    throw new CapabilityError('TOKEN_UNTRUSTED', 'no signed Biscuit root key to verify the Biscuit with');
  const b = await readBiscuit(t.token, expected.biscuitRootKey);
  // The service's blocks (one per signed link) restate the chain; blocks a holder appended
  // after them may only narrow it.
  const minted = expected.links.length;
  if (!blocksNarrow(b.blocks, minted))
    throw new CapabilityError('SCOPE_WIDENED', 'a Biscuit attenuation block widens the scope before it');
  const restated = b.blocks.slice(0, minted) as ChainLink[];
  if (!sameLinks(b.claims.links, expected.links) || !sameLinks(restated, expected.links))
    throw new CapabilityError('TOKEN_MISMATCH', 'Biscuit delegations or blocks differ from the signed chain');
  if (b.claims.capability !== expected.capability || b.claims.step !== expected.step)
    throw new CapabilityError('TOKEN_MISMATCH', `Biscuit is about ${b.claims.capability}`);
  if (ctx.recordId !== undefined && !b.claims.attestations.includes(ctx.recordId))
    throw new CapabilityError(
      'TOKEN_MISMATCH',
      `Biscuit attestation facts do not name record ${ctx.recordId}`,
    );
  if (ctx.createdAt !== null && b.claims.validUntil !== null && b.claims.validUntil < ctx.createdAt)
    throw new CapabilityError('TOKEN_EXPIRED', 'Biscuit expired before its record was made');
  return { label: 'biscuit' };
}

/** Checks one token against the signed chain; its problem is reported, and it is returned when it verified. */
async function checkToken(
  t: Token,
  expected: Expected,
  ctx: RecordContext,
  out: Findings,
): Promise<CheckedToken | undefined> {
  try {
    if (t.format === 'vc+jwt') return checkVc(t, expected, ctx);
    if (t.format === 'biscuit') return await checkBiscuit(t, expected, ctx);
    out.fail('TOKEN_MALFORMED', `unknown token format ${t.format}`);
  } catch (err) {
    if (err instanceof CapabilityError) out.fail(err.code, `${t.format}: ${err.message}`);
    else out.fail('TOKEN_MALFORMED', `${t.format}: ${String(err)}`);
  }
  return undefined;
}

/** A capability record: its own signed predicate is the chain; its view and tokens must say it. */
async function capabilityRecord(
  record: Record<string, unknown>,
  p: CapabilityPredicate,
  tokens: readonly Token[],
  ctx: RecordContext,
  out: Findings,
): Promise<void> {
  for (const e of chainProblems(p.chain)) out.fail(e.code, e.message);
  const capability = `capability:${p.runId}:${p.stepId}:${p.index}`;
  const step = `step:${p.runId}:${p.stepId}`;
  if (p.root !== undefined && p.root.keyId !== ctx.recordKeyId)
    out.fail(
      'TOKEN_UNTRUSTED',
      `the chain names root ${p.root.keyId} but the envelope is signed by ${String(ctx.recordKeyId)}`,
    );
  const served = record.capability_chain;
  if (served !== undefined && served !== null) {
    if (!Array.isArray(served) || served.length > 1)
      out.fail('CHAIN_MISMATCH', 'a capability record serves exactly its own chain view');
    else if (served.length === 1 && !sameView(served[0], chainView(p)))
      out.fail('CHAIN_MISMATCH', `capability_chain of ${capability} differs from its signed predicate`);
  }
  const expected = { capability, step, links: p.chain, biscuitRootKey: p.root?.biscuitRootKey ?? null };
  const verified: string[] = [];
  for (const t of tokens) {
    const ok = await checkToken(t, expected, ctx, out);
    if (ok) verified.push(ok.label);
  }
  out.chains.push({
    capability,
    step,
    scope: p.chain.at(-1)?.scope ?? '',
    links: p.chain,
    rootKeyId: p.root?.keyId ?? null,
    tokens: verified,
  });
}

/** The labels of the Biscuits of the capability `vc` verified, or a problem when none matches. */
async function biscuitsOf(
  vc: CheckedToken & { links: ChainLink[]; capability: string },
  biscuits: readonly Token[],
  step: string,
  ctx: RecordContext,
  out: Findings,
): Promise<string[]> {
  const labels: string[] = [];
  let matched = false;
  for (const b of biscuits) {
    try {
      const parsed = await readBiscuit(b.token, vc.biscuitRootKey ?? '');
      if (parsed.claims.capability !== vc.capability) continue;
      const expected = {
        capability: vc.capability,
        step,
        links: vc.links,
        biscuitRootKey: vc.biscuitRootKey ?? null,
      };
      const checked = await checkToken(b, expected, ctx, out);
      if (checked) labels.push(checked.label);
      matched = true;
    } catch {
      /* another capability's Biscuit, or one that fails: reported below when none matches */
    }
  }
  if (!matched && biscuits.length > 0)
    out.fail(
      'TOKEN_UNTRUSTED',
      `no Biscuit of ${vc.capability} verifies under the Biscuit root key its VC signs`,
    );
  return labels;
}

/**
 * A step record: its chains are what its VCs (signed by the envelope's key) say; each Biscuit is
 * checked against the chain and Biscuit root of the VC of the same capability, and each served view
 * must be the one a verified VC backs.
 */
async function stepRecord(
  record: Record<string, unknown>,
  tokens: readonly Token[],
  ctx: RecordContext,
  out: Findings,
): Promise<void> {
  const vcs = tokens.filter((t) => t.format === 'vc+jwt');
  const biscuits = tokens.filter((t) => t.format === 'biscuit');
  const step = `step:${String(record.run_id)}:${String(record.step_id)}`;
  const served = record.capability_chain;
  if (served !== undefined && served !== null && !Array.isArray(served))
    out.fail('CHAIN_MISMATCH', 'capability_chain is not a list');
  const views: unknown[] = Array.isArray(served) ? served : [];
  // No VC to check the views with. An empty token list is a record that should have tokens and
  // lost them: TOKENS_MISSING. An absent one is what SERVICE_CAPABILITY_TOKENS=0 serves (the field
  // removed on every record): the step's views are then not checked here and no CHAIN line vouches
  // for them (the capability records carry the signed chains, checked against their predicates).
  // Failing it would make every export of such a deployment unverifiable.
  if (views.length > 0 && vcs.length === 0 && record.capability_tokens !== undefined)
    out.fail('TOKENS_MISSING', `${views.length} chain(s) but no VC to verify them with`);
  /** Views a verified VC backs (by index); every other view is reported after the loop. */
  const backed = new Set<number>();
  const envelopeKey = ctx.keys.find((k) => keyIdOf(k) === ctx.recordKeyId);
  const algorithm = envelopeKey !== undefined ? (algorithmOf(envelopeKey) ?? null) : null;
  for (const vc of vcs) {
    const ok = await checkToken(vc, { capability: '', step, links: [], biscuitRootKey: null }, ctx, out);
    if (ok === undefined || ok.links === undefined || ok.capability === undefined) continue;
    const checked = { ...ok, links: ok.links, capability: ok.capability };
    for (const e of chainProblems(ok.links)) out.fail(e.code, e.message);
    // The view the VC backs: what chainView makes of the chain the VC signs (its root is the
    // envelope's key, which signed the VC, with the Biscuit root the VC vouches for).
    const expected = viewOf({
      capability: ok.capability,
      step,
      root: {
        authority: ok.authority ?? null,
        key_id: ctx.recordKeyId,
        algorithm,
        biscuit_root_key: ok.biscuitRootKey ?? null,
      },
      links: ok.links,
    });
    const at = views.findIndex((v, i) => !backed.has(i) && isObject(v) && v.capability === ok.capability);
    if (at < 0 || !sameView(views[at], expected))
      out.fail('TOKEN_MISMATCH', `capability_chain of ${ok.capability} differs from its signed VC`);
    if (at >= 0) backed.add(at);
    const labels = [ok.label, ...(await biscuitsOf(checked, biscuits, step, ctx, out))];
    out.chains.push({
      capability: ok.capability,
      step,
      scope: ok.links.at(-1)?.scope ?? '',
      links: ok.links,
      rootKeyId: ctx.recordKeyId,
      tokens: labels,
    });
  }
  // A view no verified VC backs: reported unless a VC failed (or there is none: TOKENS_MISSING),
  // whose problem already fails the record and is the likelier cause.
  const vcFailed = out.chains.length < vcs.length;
  views.forEach((v, i) => {
    if (backed.has(i) || vcs.length === 0 || vcFailed) return;
    const name = isObject(v) && typeof v.capability === 'string' ? v.capability : `#${i + 1}`;
    out.fail('CHAIN_MISMATCH', `capability_chain of ${name} has no verified VC of its capability`);
  });
}

/**
 * Verifies the capability chains of one API record (see the module comment). Records of other
 * kinds, or without chains, give an ok report with no chains. Never throws for bad input.
 */
export async function verifyCapabilities(record: unknown, trust: Trust): Promise<CapabilityReport> {
  const out = new Findings();
  if (!isObject(record)) return out.report();
  const kind = record.kind;
  const tokens = (Array.isArray(record.capability_tokens) ? record.capability_tokens : []).filter(
    (t): t is Token => isObject(t) && typeof t.format === 'string' && typeof t.token === 'string',
  );
  // Other kinds carry no chain: skip them before paying for a second signature check.
  if (typeof kind === 'string' && kind !== 'capability' && kind !== 'step') return out.report();
  const statementOf = verifyRecord(record, trust);
  const isCapability =
    kind === 'capability' || statementOf.statement?.predicateType === PredicateTypes.capability;
  if (!isCapability && kind !== 'step') return out.report();
  if (!statementOf.ok || statementOf.statement === undefined) {
    out.fail(
      'ENVELOPE_UNVERIFIED',
      'the envelope does not verify, so its capability chain cannot be trusted',
    );
    return out.report();
  }
  const ctx: RecordContext = {
    keys:
      'publicKeys' in trust
        ? trust.publicKeys.map((k) => (k.type === 'private' ? createPublicKey(k) : k))
        : trust.certificateChain.slice(0, 1).map((c) => c.publicKey),
    recordKeyId: statementOf.keyId ?? null,
    recordId: typeof record.id === 'string' ? record.id : undefined,
    createdAt: typeof record.created_at === 'string' ? new Date(record.created_at) : null,
  };
  if (isCapability)
    await capabilityRecord(record, statementOf.statement.predicate as CapabilityPredicate, tokens, ctx, out);
  else await stepRecord(record, tokens, ctx, out);
  return out.report();
}
