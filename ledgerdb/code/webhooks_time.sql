-- A time in an event's payload: UTC, RFC 3339, as the envelope's timestamp is (NULL stays NULL).
CREATE FUNCTION ledger_webhook_time(t timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
{{ template "nobody_may_call" (dict "fn" "ledger_webhook_time(timestamptz)") }}
