-- Console sessions, and an index for the console's dead letters page.
--
-- A key pasted once into the console's sign-in form becomes a session, so that
-- the browser never holds the key itself (package apikeys, sessions.go; docs/console.md).
--
-- The browser holds an opaque token (256 random bits) in an HttpOnly cookie; the row keeps its
-- SHA-256 only, so a copy of this table opens no session. A session acts as the key it was opened
-- with and for no longer than it may: it ends at its own expiry, at the key's expiry, when it is
-- signed out, and the moment its key is revoked — a session is honoured only while its key's row
-- is active, read on every request.
--
-- The service's role reads the table (a request is authenticated with a SELECT) and changes it only
-- through ledger_console_open_session and ledger_console_end_session (ledgerdb/code). A session's
-- end is final and nothing else of it ever changes (console_sessions_fixed_fields).
CREATE TABLE console_sessions (
    -- SHA-256 of the cookie's token; the token itself is nowhere.
    token_hash bytea       PRIMARY KEY,
    -- The key the session acts as: copied by ledger_console_open_session from the active key it
    -- found, whose row is never deleted. No foreign key: api_keys refuses TRUNCATE and DELETE by its
    -- own trigger, with the ledger's error codes, which a reference would pre-empt.
    key_id     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- After this instant the session authenticates nothing: the console's session lifetime, or
    -- the key's own expiry when that comes first.
    expires_at timestamptz NOT NULL,
    -- Set once, when the session is signed out.
    ended_at   timestamptz,
    CONSTRAINT console_sessions_token_hash_sha256 CHECK (octet_length(token_hash) = 32),
    CONSTRAINT console_sessions_expires_after_creation CHECK (expires_at > created_at),
    CONSTRAINT console_sessions_ended_after_creation CHECK (ended_at IS NULL OR ended_at >= created_at)
);

-- A key's sessions, for the join that ends them with the key.
CREATE INDEX console_sessions_key ON console_sessions (key_id);

-- What ledger_console_open_session answers: applied (the session is open) or unauthenticated (no
-- active key has the secret; nothing written), the key the session acts as, and its expiry.
CREATE TYPE ledger_console_session_result AS (
    outcome    text,
    key        api_keys,
    expires_at timestamptz
);

-- The console's dead letters page reads the refunded jobs of every account, newest refund first
-- (ledgerdb.Store.DeadLetters): a partial index keeps it off the whole jobs table.
CREATE INDEX jobs_dead_letters ON jobs (refunded_at DESC) WHERE state = 'refunded';
