import { cosignatureVerifier, parseWitnessVkey, type WitnessKey } from './cosignature.ts';
import { TlogError } from './errors.ts';
import { ed25519NoteVerifier, parseVkey, type Note, type NoteVerifier } from './note.ts';

/**
 * Witness policies in the c2sp.org/tlog-policy format: which log keys sign checkpoints, which
 * witnesses are known, and the quorum of them a checkpoint needs.
 *
 *   log <vkey> [<url>]
 *   witness <name> <vkey> [<url>]
 *   group <name> all|any|<k> <member>…
 *   quorum <name>|none
 *
 * Names are defined before use, each member at most once per group, exactly one quorum line.
 * `policyOf` builds the same from command-line flags (k of the witnesses given).
 */

export type Quorum =
  | { readonly kind: 'none' }
  | { readonly kind: 'witness'; readonly name: string }
  | {
      readonly kind: 'group';
      readonly name: string;
      readonly k: number;
      readonly members: readonly Quorum[];
    };

export interface PolicyWitness {
  /** The policy's own name for it (tlog-policy names are local to the file). */
  readonly name: string;
  readonly key: WitnessKey;
  readonly url?: string;
}

export interface TlogPolicy {
  /** Ed25519 note keys of the logs (their key names are the origins). */
  readonly logs: readonly { readonly vkey: string; readonly url?: string }[];
  readonly witnesses: readonly PolicyWitness[];
  readonly quorum: Quorum;
}

/** Most logs, witnesses and groups one policy may define (the spec recommends supporting 32). */
const MAX_DEFINITIONS = 256;

export function parsePolicy(text: string): TlogPolicy {
  const logs: { vkey: string; url?: string }[] = [];
  const witnesses: PolicyWitness[] = [];
  const names = new Map<string, Quorum>();
  const keys = new Set<string>();
  let quorum: Quorum | undefined;
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const bad = (why: string): never => {
      throw new TlogError('MALFORMED_POLICY', `policy line ${i + 1}: ${why}`);
    };
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(raw.replace(/\r$/, ''))) bad('a control character');
    const line = raw.replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) return;
    const [keyword, ...args] = line.split(/[ \t]+/);
    if (logs.length + witnesses.length + names.size > MAX_DEFINITIONS) bad('too many definitions');
    const keyOf = (vkey: string): string => {
      let material: string;
      try {
        material = parseVkey(vkey).key.toString('hex');
      } catch (err) {
        return bad((err as Error).message);
      }
      if (keys.has(material)) bad('the same public key is listed twice');
      keys.add(material);
      return material;
    };
    switch (keyword) {
      case 'log': {
        if (args.length < 1 || args.length > 2) bad('expected: log <vkey> [<url>]');
        keyOf(args[0]!);
        try {
          ed25519NoteVerifier(args[0]!);
        } catch (err) {
          bad((err as Error).message);
        }
        logs.push({ vkey: args[0]!, ...(args[1] !== undefined ? { url: args[1] } : {}) });
        return;
      }
      case 'witness': {
        if (args.length < 2 || args.length > 3) bad('expected: witness <name> <vkey> [<url>]');
        const [name, vkey, url] = args as [string, string, string | undefined];
        if (name === 'none' || names.has(name)) bad(`the name ${name} is taken`);
        keyOf(vkey);
        let key: WitnessKey;
        try {
          key = parseWitnessVkey(vkey);
        } catch (err) {
          return bad((err as Error).message);
        }
        witnesses.push({ name, key, ...(url !== undefined ? { url } : {}) });
        names.set(name, { kind: 'witness', name });
        return;
      }
      case 'group': {
        if (args.length < 3) bad('expected: group <name> all|any|<k> <member>…');
        const [name, threshold, ...members] = args as [string, string, ...string[]];
        if (name === 'none' || names.has(name)) bad(`the name ${name} is taken`);
        if (new Set(members).size !== members.length) bad('a member is listed twice');
        const resolved = members.map((m) => names.get(m) ?? bad(`unknown member ${m} (define it first)`));
        const k =
          threshold === 'all'
            ? members.length
            : threshold === 'any'
              ? 1
              : /^[1-9][0-9]*$/.test(threshold) && Number(threshold) <= members.length
                ? Number(threshold)
                : bad(`threshold ${threshold}: all, any, or 1…${members.length}`);
        names.set(name, { kind: 'group', name, k, members: resolved });
        return;
      }
      case 'quorum': {
        if (args.length !== 1) bad('expected: quorum <name>');
        if (quorum !== undefined) bad('a second quorum line');
        quorum =
          args[0] === 'none' ? { kind: 'none' } : (names.get(args[0]!) ?? bad(`unknown quorum ${args[0]}`));
        return;
      }
      default:
        bad(`unknown keyword ${keyword}`);
    }
  });
  if (quorum === undefined) throw new TlogError('MALFORMED_POLICY', 'the policy has no quorum line');
  return { logs, witnesses, quorum };
}

/**
 * The policy `service-ctl verify --witness V … --witness-quorum K` means: K of the given witnesses
 * (all of them when K is omitted), the log keys given (none: the caller supplies them elsewhere).
 */
export function policyOf(options: {
  logVkeys?: readonly string[];
  witnessVkeys: readonly string[];
  quorum?: number;
}): TlogPolicy {
  const lines = [
    ...(options.logVkeys ?? []).map((v) => `log ${v}`),
    ...options.witnessVkeys.map((v, i) => `witness w${i + 1} ${v}`),
  ];
  const n = options.witnessVkeys.length;
  const k = options.quorum ?? n;
  if (n === 0) lines.push(`quorum none`);
  else {
    if (!Number.isSafeInteger(k) || k < 1 || k > n) {
      throw new TlogError('MALFORMED_POLICY', `the witness quorum must be 1…${n}, got ${k}`);
    }
    lines.push(
      `group given ${k} ${options.witnessVkeys.map((_v, i) => `w${i + 1}`).join(' ')}`,
      'quorum given',
    );
  }
  return parsePolicy(lines.join('\n'));
}

export function logVerifiers(policy: TlogPolicy): NoteVerifier[] {
  return policy.logs.map((l) => ed25519NoteVerifier(l.vkey));
}

/** Whether the witnesses (policy names) that cosigned satisfy the quorum. */
export function quorumMet(q: Quorum, cosigned: ReadonlySet<string>): boolean {
  switch (q.kind) {
    case 'none':
      return true;
    case 'witness':
      return cosigned.has(q.name);
    case 'group':
      return q.members.filter((m) => quorumMet(m, cosigned)).length >= q.k;
  }
}

export function describeQuorum(q: Quorum): string {
  switch (q.kind) {
    case 'none':
      return 'none';
    case 'witness':
      return q.name;
    case 'group':
      return `${q.k} of (${q.members.map(describeQuorum).join(', ')})`;
  }
}

/**
 * The policy witnesses whose cosignatures on `note` verify. A line by a known witness key that
 * does not verify rejects the note (NOTE_SIGNATURE_INVALID), as c2sp.org/signed-note advises;
 * lines of unknown keys are ignored.
 */
export function verifiedCosigners(note: Note, policy: TlogPolicy): Set<string> {
  const out = new Set<string>();
  for (const w of policy.witnesses) {
    const v = cosignatureVerifier(w.key);
    for (const sig of note.signatures) {
      if (sig.name !== v.name || sig.keyId !== v.keyId) continue;
      if (!v.verify(note.text, sig.signature)) {
        throw new TlogError('NOTE_SIGNATURE_INVALID', `the cosignature of witness ${w.name} does not verify`);
      }
      out.add(w.name);
    }
  }
  return out;
}
