-- Signed-out UI sessions (docs/adr/0016-web-ui.md). A session is a sealed cookie that every replica
-- can open until its `exp` (8 h after sign-in); signing out must end it on the server too, or a
-- copied cookie keeps the UI and /v1 (exports included) for the rest of those hours. Sign-out
-- records the session's id here; every replica refuses a session whose id is here. A row is kept
-- only while its session could still be opened (`expires_at` = the cookie's `exp`, plus a margin
-- for clocks): each revocation first removes the rows past that, so the table holds at most the
-- sign-outs of the last session lifetime.
-- The function below resolves names in the vault's schema, then pg_temp last (as in 0008).
DO $$
BEGIN
  EXECUTE format('SET LOCAL search_path = %I, pg_temp', current_schema());
END
$$;

CREATE TABLE ui_session_revocations (
  sid text PRIMARY KEY CHECK (sid ~ '^[A-Za-z0-9_-]{16,64}$'),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ui_session_revocations_expires_at ON ui_session_revocations (expires_at);

-- The runtime never deletes (docs/vault.md, "Roles"): revoking goes through this function, which
-- prunes what can no longer matter and never keeps a row longer than a day (a session lives 8 h;
-- an `expires_at` further out is cut to that).
CREATE FUNCTION ui_session_revoke(p_sid text, p_expires_at timestamptz)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
  DELETE FROM ui_session_revocations WHERE expires_at < clock_timestamp() - interval '5 minutes';
  INSERT INTO ui_session_revocations (sid, expires_at)
    VALUES (p_sid, least(p_expires_at, clock_timestamp() + interval '1 day'))
    ON CONFLICT (sid) DO NOTHING;
$$;

REVOKE ALL ON ui_session_revocations FROM PUBLIC;
GRANT SELECT ON ui_session_revocations TO vault_writer;
REVOKE ALL ON FUNCTION ui_session_revoke(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ui_session_revoke(text, timestamptz) TO vault_writer;
