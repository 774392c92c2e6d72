import type * as BiscuitWasm from '@biscuit-auth/biscuit-wasm';
import type { ChainLink } from './chain.ts';
import { CapabilityError } from './errors.ts';
import { holding, type Held } from './wasm-held.ts';

/**
 * The Biscuit operations on a biscuit-wasm instance in this thread (docs/capabilities.md has the
 * facts and a sample authorizer). Services do not call these directly: src/capability/biscuit.ts
 * runs them in a worker thread that is replaced after a number of calls (biscuit-host.ts), because
 * biscuit-wasm's linear memory grows with every mint and never shrinks. Keys arrive as bytes: a
 * Signer cannot cross into a worker.
 */

type Wasm = typeof BiscuitWasm;
let loading: Promise<Wasm> | undefined;

/**
 * The wasm module, loaded once on first use (Node ≥ 22 loads its .wasm as an ES module). Its start
 * function prints "biscuit-wasm loading" with console.log, which would corrupt the stdout of
 * `service-ctl verify --json` and NDJSON pipelines: console.log is muted for that one import.
 */
export function loadBiscuit(): Promise<Wasm> {
  loading ??= (async () => {
    /* eslint-disable no-console -- muting the library's own console.log, see above */
    const log = console.log;
    console.log = () => {};
    try {
      return await import('@biscuit-auth/biscuit-wasm');
    } catch (err) {
      loading = undefined;
      throw new CapabilityError('BISCUIT_UNAVAILABLE', `cannot load biscuit-wasm: ${String(err)}`, {
        cause: err,
      });
    } finally {
      console.log = log;
    }
    /* eslint-enable no-console */
  })();
  return loading;
}

/** `ed25519/<hex>`: the Biscuit root public key of a root seed, as Biscuit tooling prints it. */
export async function rootKeyOfSeed(seed: Uint8Array): Promise<string> {
  const b = await loadBiscuit();
  return holding((h) => {
    const root = h.keep(b.PrivateKey.fromBytes(seed, b.SignatureAlgorithm.Ed25519));
    const key = h.keep(b.KeyPair.fromPrivateKey(root));
    return h.keep(key.getPublicKey()).toString();
  });
}

/** What a token says: the authority block's facts. */
export interface BiscuitClaims {
  readonly namespace: string;
  readonly runId: string;
  /** `step:<run>:<step>` */
  readonly step: string;
  /** `capability:<run>:<step>:<n>` */
  readonly capability: string;
  /** Vault ids of the capability and step attestations (the evidence). */
  readonly attestations: readonly string[];
  readonly links: readonly ChainLink[];
  readonly validUntil: Date;
}

/** A Datalog code block with its parameters (values are never spliced into the source). */
class Code {
  readonly lines: string[] = [];
  readonly params: Record<string, unknown> = {};
  private n = 0;
  /** `{pN}` placeholders for `values`, in order. */
  add(template: (...names: string[]) => string, ...values: unknown[]): this {
    const names = values.map((v) => {
      const name = `p${this.n++}`;
      this.params[name] = v instanceof Date ? { date: v.toISOString() } : v;
      return `{${name}}`;
    });
    this.lines.push(template(...names));
    return this;
  }
  get source(): string {
    return this.lines.join('\n');
  }
}

/**
 * Datalog check that the requested operation lies within `scope` (scope.ts `covers`): equal, or
 * below it in the segment hierarchy; `*` admits any operation.
 *
 * Only Datalog 3.0 operations (`===`, `starts_with`, alternatives joined by `or`): `==` and `||`
 * are Datalog 3.3 (heterogeneous equality, lazy booleans), which would make biscuit-wasm sign the
 * block with signature format v1, which the Java implementation (4.0.1) does not verify.
 */
function scopeCheck(code: Code, scope: string): void {
  if (scope === '*') code.add(() => 'check if operation($op);');
  else
    code.add(
      (s, prefix) => `check if operation($op), $op === ${s} or operation($op), $op.starts_with(${prefix});`,
      scope,
      `${scope}:`,
    );
}

/**
 * Mints the token: the authority block (root key) states the chain as the service recorded it;
 * one attenuation block per link restates that link and restricts the operations the token allows
 * to the link's scope. The authorizer trusts the authority block only (Biscuit's default scope),
 * so "approved by X for scope Y" is checked against facts the root signed.
 */
export async function mintWithSeed(
  seed: Uint8Array,
  claims: BiscuitClaims,
): Promise<{ token: string; id: string }> {
  const b = await loadBiscuit();
  const authority = new Code()
    .add((ns) => `namespace(${ns});`, claims.namespace)
    .add((r) => `run(${r});`, claims.runId)
    .add((s) => `step(${s});`, claims.step)
    .add((c) => `capability(${c});`, claims.capability);
  for (const id of claims.attestations) authority.add((a) => `attestation(${a});`, id);
  claims.links.forEach((l, i) => {
    authority.add((g, s) => `delegation(${i}, ${g}, ${s});`, l.grantedBy, l.scope);
    if (l.approvedBy !== null) authority.add((a) => `approval(${i}, ${a});`, l.approvedBy);
  });
  const last = claims.links.at(-1)!;
  authority.add((s) => `scope(${s});`, last.scope);
  authority.add((t) => `check if time($t), $t <= ${t};`, claims.validUntil);
  return holding((h) => {
    const root = h.keep(b.PrivateKey.fromBytes(seed, b.SignatureAlgorithm.Ed25519));
    const builder = h.keep(b.Biscuit.builder());
    builder.addCodeWithParameters(authority.source, authority.params, {});
    let token = h.keep(builder.build(root));
    claims.links.forEach((l, i) => {
      const block = new Code().add((g, s) => `link(${i}, ${g}, ${s});`, l.grantedBy, l.scope);
      if (l.approvedBy !== null) block.add((a) => `link_approval(${i}, ${a});`, l.approvedBy);
      scopeCheck(block, l.scope);
      const bb = h.keep(new b.BlockBuilder());
      bb.addCodeWithParameters(block.source, block.params, {});
      token = h.keep(token.appendBlock(bb));
    });
    const ids = token.getRevocationIdentifiers() as string[];
    return { token: token.toBase64(), id: ids[0]! };
  });
}

/** What verifying a token yields. */
export interface VerifiedBiscuit {
  readonly id: string;
  readonly claims: Omit<BiscuitClaims, 'validUntil'> & { validUntil: Date | null };
  /** Per attenuation block: the link it restates (null when it restates none). */
  readonly blocks: readonly (ChainLink | null)[];
}

const text = (v: unknown): string => String(v);

/** The values of one fact name in an authority-block query, as term arrays. */
function factsOf(authorizer: BiscuitWasm.Authorizer, b: Wasm, rule: string): unknown[][] {
  return holding((h) => {
    const query = h.keep(b.Rule.fromString(rule));
    const facts = (authorizer.queryWithLimits(query, LIMITS) as BiscuitWasm.Fact[]).map((f) => h.keep(f));
    return facts.map((f) => f.terms() as unknown[]);
  });
}

/** Biscuit's default 1 ms budget is below what a cold wasm instance needs on a busy machine. */
const LIMITS = { max_time_micro: 1_000_000 };

/**
 * Parses and verifies a token against one root public key (`ed25519/<hex>`), then reads its
 * authority facts. Throws TOKEN_MALFORMED (not a Biscuit), TOKEN_UNTRUSTED (signed by another
 * root or tampered: Biscuit cannot tell those apart, its signature chain just fails).
 */
export async function readWithKey(token: string, rootKey: string): Promise<VerifiedBiscuit> {
  const b = await loadBiscuit();
  const [alg, hex] = rootKey.split('/');
  if (alg !== 'ed25519' || hex === undefined || !/^[0-9a-f]{64}$/.test(hex))
    // Fixed texts here and below: the root key is data the caller or the record supplied.
    throw new CapabilityError(
      'TOKEN_UNTRUSTED',
      'unsupported Biscuit root key (ed25519/<64 hex digits> expected)',
    );
  return holding((h) => readVerified(h, b, token, hex));
}

/** readWithKey once the root key is well formed: every wasm object it makes is kept in `h`. */
function readVerified(h: Held, b: Wasm, token: string, hex: string): VerifiedBiscuit {
  let parsed: BiscuitWasm.Biscuit;
  try {
    const root = h.keep(b.PublicKey.fromString(hex, b.SignatureAlgorithm.Ed25519));
    parsed = h.keep(b.Biscuit.fromBase64(token, root));
  } catch (err) {
    const e = err as { Format?: { Signature?: unknown } };
    if (e?.Format?.Signature !== undefined)
      throw new CapabilityError(
        'TOKEN_UNTRUSTED',
        'Biscuit signature chain does not verify under the root key',
        {
          cause: err,
        },
      );
    // Fixed text: the parser's error describes the caller's bytes (kept as the cause, never shown).
    throw new CapabilityError('TOKEN_MALFORMED', 'not a Biscuit token', {
      cause: err,
    });
  }
  // Facts of the authority block only (the authorizer's default trust scope).
  const auth = h.keep(h.keep(new b.AuthorizerBuilder()).buildAuthenticated(parsed));
  const one = (name: string): string => {
    const rows = factsOf(auth, b, `x($v) <- ${name}($v)`);
    if (rows.length !== 1)
      throw new CapabilityError('TOKEN_MALFORMED', `Biscuit has ${rows.length} ${name} facts`);
    return text(rows[0]![0]);
  };
  const delegations = factsOf(auth, b, 'x($i, $g, $s) <- delegation($i, $g, $s)');
  const approvals = new Map(
    factsOf(auth, b, 'x($i, $a) <- approval($i, $a)').map((r) => [Number(r[0]), text(r[1])]),
  );
  const links = delegations
    .map((r) => ({
      i: Number(r[0]),
      l: { grantedBy: text(r[1]), scope: text(r[2]), approvedBy: null as string | null },
    }))
    .sort((x, y) => x.i - y.i)
    .map(({ i, l }) => ({ ...l, approvedBy: approvals.get(i) ?? null }));
  const blocks: (ChainLink | null)[] = [];
  for (let i = 1; i < parsed.countBlocks(); i++) {
    const src = parsed.getBlockSource(i);
    const m = /^link\((\d+), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*")\);$/m.exec(src);
    const a = /^link_approval\((\d+), ("(?:[^"\\]|\\.)*")\);$/m.exec(src);
    blocks.push(
      m === null
        ? null
        : {
            grantedBy: JSON.parse(m[2]!) as string,
            scope: JSON.parse(m[3]!) as string,
            approvedBy: a === null ? null : (JSON.parse(a[2]!) as string),
          },
    );
  }
  const expiry = /check if time\(\$t\), \$t <= (\S+);/.exec(parsed.getBlockSource(0));
  return {
    id: (parsed.getRevocationIdentifiers() as string[])[0]!,
    claims: {
      namespace: one('namespace'),
      runId: one('run'),
      step: one('step'),
      capability: one('capability'),
      attestations: factsOf(auth, b, 'x($a) <- attestation($a)').map((r) => text(r[0])),
      links,
      validUntil: expiry ? new Date(expiry[1]!) : null,
    },
    blocks,
  };
}

/**
 * Runs an authorizer (Datalog source with `time`, `operation` facts and policies) against a token
 * verified under `rootKey`; returns the index of the matching allow policy or throws.
 */
export async function authorizeWithKey(token: string, rootKey: string, authorizer: string): Promise<number> {
  const b = await loadBiscuit();
  const hex = rootKey.split('/')[1] ?? '';
  return holding((h) => {
    const root = h.keep(b.PublicKey.fromString(hex, b.SignatureAlgorithm.Ed25519));
    const parsed = h.keep(b.Biscuit.fromBase64(token, root));
    const builder = h.keep(new b.AuthorizerBuilder());
    builder.addCode(authorizer);
    return h.keep(builder.buildAuthenticated(parsed)).authorizeWithLimits(LIMITS);
  });
}

/** One Biscuit operation, as it crosses into the worker (structured-cloneable). */
export type BiscuitRequest =
  | { readonly op: 'rootKey'; readonly seed: Uint8Array }
  | { readonly op: 'mint'; readonly seed: Uint8Array; readonly claims: BiscuitClaims }
  | { readonly op: 'read'; readonly token: string; readonly rootKey: string }
  | {
      readonly op: 'authorize';
      readonly token: string;
      readonly rootKey: string;
      readonly authorizer: string;
    };

/** What each operation resolves to. */
export interface BiscuitResults {
  rootKey: string;
  mint: { token: string; id: string };
  read: VerifiedBiscuit;
  authorize: number;
}

/** Runs one request on this thread's instance. */
export function perform(request: BiscuitRequest): Promise<BiscuitResults[BiscuitRequest['op']]> {
  switch (request.op) {
    case 'rootKey':
      return rootKeyOfSeed(request.seed);
    case 'mint':
      return mintWithSeed(request.seed, request.claims);
    case 'read':
      return readWithKey(request.token, request.rootKey);
    case 'authorize':
      return authorizeWithKey(request.token, request.rootKey, request.authorizer);
  }
}
