-- Sets a kind's price: a new version of the price list, which applies to jobs submitted after it
-- (a job keeps the version it was submitted at). The same unit, unit price and maximum as the
-- latest version answer already_applied and write nothing, so a repeated call is harmless.
CREATE FUNCTION ledger_set_price(p_kind text, p_unit text, p_unit_price bigint, p_max_units bigint, p_memo text)
RETURNS ledger_price_result
LANGUAGE plpgsql {{ template "run_as_owner" . }} AS $$
DECLARE
    latest prices;
    p      prices;
BEGIN
    -- Two price changes of one kind at once must not both take the next version number.
    PERFORM pg_advisory_xact_lock(hashtextextended('ledger_set_price:' || p_kind, 0));
    SELECT * INTO latest FROM prices WHERE kind = p_kind ORDER BY version DESC LIMIT 1;
    IF FOUND AND latest.unit = p_unit AND latest.unit_price = p_unit_price AND latest.max_units = p_max_units THEN
        RETURN ROW('already_applied', latest)::ledger_price_result;
    END IF;
    INSERT INTO prices (kind, version, unit, unit_price, max_units, memo)
    VALUES (p_kind, coalesce(latest.version, 0) + 1, p_unit, p_unit_price, p_max_units, coalesce(p_memo, ''))
    RETURNING * INTO p;
    RETURN ROW('applied', p)::ledger_price_result;
END
$$;
{{ template "service_may_call" (dict "fn" "ledger_set_price(text, text, bigint, bigint, text)") }}
