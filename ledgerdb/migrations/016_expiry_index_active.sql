-- The expiry pass reads the blocks whose time has come, and expires active ones only: a void
-- block never expires, and a pending one past its expiry is voided when its payment is settled.
-- The index held those too, so every pass walked past each void or pending block whose expiry had
-- passed, more of them with every month of grants that failed to pay. It now holds what the pass
-- can expire.
DROP INDEX credit_blocks_to_expire;
CREATE INDEX credit_blocks_to_expire ON credit_blocks (expires_at)
    WHERE expired_at IS NULL AND expires_at IS NOT NULL AND status = 'active';

---- create above / drop below ----

DROP INDEX credit_blocks_to_expire;
CREATE INDEX credit_blocks_to_expire ON credit_blocks (expires_at) WHERE expired_at IS NULL AND expires_at IS NOT NULL;
