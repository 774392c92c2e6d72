import { canonicalJson, sha256Hex } from '../attest/index.ts';
import type { Aibom, AibomSummary } from './types.ts';

/**
 * The AIBOM's bytes: UTF-8 of its RFC 8785 (JCS) canonical JSON, no trailing newline. These bytes
 * are what is stored, hashed (aibomDigest), signed and referenced by the C2PA manifest.
 */
export function serializeAibom(bom: Aibom): Buffer {
  return Buffer.from(canonicalJson(bom), 'utf8');
}

/** `sha256:` + hex SHA-256 of the stored bytes (serializeAibom). */
export function aibomDigest(bytes: Buffer): string {
  return `sha256:${sha256Hex(bytes)}`;
}

/**
 * The CLI form: the canonical document re-indented (two spaces, members in JCS order, trailing
 * newline). JCS of the parsed text gives serializeAibom's bytes again, since JSON.parse and
 * JSON.stringify round-trip JCS numbers and strings exactly.
 */
export function prettyAibom(bom: Aibom): string {
  return `${JSON.stringify(JSON.parse(canonicalJson(bom)), null, 2)}\n`;
}

/**
 * The `summary` tally of the object-store metadata: model and tool step counts, the guardrail count
 * (the sum over `components.policies[]` of their guardrails: a guardrail enforced by two packs counts
 * twice) and the run's pack name (`metadata.policy_pack`).
 */
export function summarize(bom: Aibom): AibomSummary {
  return {
    models: bom.components.models.length,
    tools: bom.components.tools.length,
    guardrails: bom.components.policies.reduce((n, p) => n + p.guardrails.length, 0),
    policy_pack: bom.metadata.policy_pack,
  };
}
