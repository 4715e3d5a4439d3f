-- Writes a balance.low event (ledger_emit_event) when a debit took the account's balance from at
-- or above its low-balance threshold to below it, inside the debit's transaction: once per
-- crossing, so a balance that stays low is not announced again until it has been topped up past
-- the threshold and falls again. p_job_id is the job whose charge or reclaim debited (NULL for an
-- adjustment); it travels in the payload only, so the event does not wait behind the job's.
CREATE FUNCTION ledger_note_debit(p_account_id text, p_balance_before bigint, p_balance_after bigint, p_job_id text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    SELECT threshold INTO t FROM webhook_low_balance WHERE account_id = p_account_id;
    IF NOT FOUND OR NOT (p_balance_before >= t AND p_balance_after < t) THEN
        RETURN;
    END IF;
    PERFORM ledger_emit_event(p_account_id, NULL, 'balance.low', jsonb_build_object(
        'account_id', p_account_id,
        'balance', p_balance_after,
        'threshold', t,
        'job_id', CASE WHEN p_job_id IS NULL THEN NULL ELSE substr(p_job_id, char_length(p_account_id) + 2) END));
END
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_note_debit(text, bigint, bigint, text)") }}
