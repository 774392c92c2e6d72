-- Capability grants (issue 13): one row per capability record, written in the transaction of the
-- step batch that holds it (src/vault/claims.ts), so a capability, its step, its chain and its
-- tokens commit together or not at all. Numbered after the issue so parallel branches do not collide.
--
-- `chain` is the API view of the chain of authority (root, links, approval); `tokens` are the
-- projections minted once at record time (W3C VC as application/vc+jwt, Biscuit v3), each
-- `{format, id, token}`: they carry the vault ids of the records they were minted for, which is why
-- they live beside the append-only attestations instead of inside them. `token_ids` indexes the
-- token identifiers for the query filter; `public_key` (SPKI DER, base64) and `biscuit_root_key`
-- are the root's public keys, so the API can check a pasted token without another key store.
CREATE TABLE capability_grants (
  -- No foreign keys to attestations: a reference would make TRUNCATE attestations fail on the
  -- reference (0A000) before the append-only trigger answers (23001); the rows are written in the
  -- transaction that inserts those attestations, which is what ties them.
  capability_attestation_id uuid PRIMARY KEY,
  step_attestation_id uuid NOT NULL,
  namespace text NOT NULL,
  capability_id text NOT NULL,
  chain jsonb NOT NULL,
  tokens jsonb NOT NULL DEFAULT '[]',
  token_ids text[] NOT NULL DEFAULT '{}',
  public_key text NOT NULL,
  biscuit_root_key text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT capability_grants_chain_object CHECK (jsonb_typeof(chain) = 'object'),
  CONSTRAINT capability_grants_tokens_array CHECK (jsonb_typeof(tokens) = 'array')
);
CREATE INDEX capability_grants_step ON capability_grants (step_attestation_id);
CREATE INDEX capability_grants_token_ids ON capability_grants USING gin (token_ids);
CREATE INDEX capability_grants_namespace_keys ON capability_grants (namespace, biscuit_root_key, public_key);

CREATE TRIGGER capability_grants_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON capability_grants
  FOR EACH STATEMENT EXECUTE FUNCTION vault_reject_change();

REVOKE ALL ON capability_grants FROM PUBLIC;
GRANT SELECT, INSERT ON capability_grants TO vault_writer;
