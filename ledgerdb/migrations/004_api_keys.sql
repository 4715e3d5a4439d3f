-- API keys, kept hashed in the ledger's database so that they can be created and revoked while the
-- API runs (package apikeys; docs/api.md, "Keys and scopes").
--
-- A key's secret is 256 random bits, shown to its holder once and never stored: the row keeps its
-- SHA-256. A fast hash is right for a secret of that entropy (there is nothing to guess a
-- dictionary from), and it lets the API find a key by the hash of what a caller sends, with one
-- indexed look-up whose time does not depend on how close a wrong secret came.
--
-- The service's role may read the table (the API authenticates with a SELECT) and change it only
-- through ledger_create_api_key and ledger_revoke_api_key (ledgerdb/code). A revocation is final,
-- and a key's row is never deleted — its ID names it in the logs for as long as they are kept —
-- whoever asks (api_keys_refuse_rewrite, ledger_refuse_rewrite).
CREATE TABLE api_keys (
    -- The public name of the key, shown in lists and logs: "key_" and random base62.
    id          text        PRIMARY KEY,
    -- SHA-256 of the secret; the secret itself is nowhere.
    secret_hash bytea       NOT NULL,
    -- customer: one account's jobs, balance, ledger and prices. customer_read: the same, read
    -- only. runner: the GPU service, which may only report results. admin: everything.
    scope       text        NOT NULL,
    -- The one account of a customer or customer_read key; NULL for runner and admin keys, which
    -- are not an account's.
    account_id  text        REFERENCES accounts (id),
    -- Who holds the key or what it is for, so that an operator can tell keys apart.
    name        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- After this instant the key no longer authenticates; NULL: it does not expire.
    expires_at  timestamptz,
    -- Set once, when the key is revoked; it never authenticates again.
    revoked_at  timestamptz,
    CONSTRAINT api_keys_secret_hash_unique UNIQUE (secret_hash),
    CONSTRAINT api_keys_id_format CHECK (id ~ '^key_[0-9A-Za-z]{16,64}$'),
    CONSTRAINT api_keys_secret_hash_sha256 CHECK (octet_length(secret_hash) = 32),
    CONSTRAINT api_keys_scope_known CHECK (scope IN ('customer', 'customer_read', 'runner', 'admin')),
    CONSTRAINT api_keys_account_by_scope CHECK ((scope IN ('customer', 'customer_read')) = (account_id IS NOT NULL)),
    CONSTRAINT api_keys_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT api_keys_expires_after_creation CHECK (expires_at IS NULL OR expires_at > created_at),
    CONSTRAINT api_keys_revoked_after_creation CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);

-- The keys of one account, for `jobbill key list --account` and GET /v1/keys?account_id=.
CREATE INDEX api_keys_account ON api_keys (account_id) WHERE account_id IS NOT NULL;

-- What ledger_revoke_api_key answers: applied (revoked now), already_applied (revoked before;
-- nothing written) or not_found (no key has the ID), and the key as it now stands.
CREATE TYPE ledger_api_key_result AS (
    outcome text,
    key     api_keys
);
