-- The bound of an account's exposures (ledgerdb.MaxBalance, a test keeps the two equal): the
-- balance plus every pending refund may not exceed it, the balance minus every pending reclaim may
-- not go below its negative, so that a refund or reclaim — never refused — always fits a bigint.
CREATE FUNCTION ledger_max_balance() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 1000000000000000000::bigint $$;
{{ template "nobody_may_call" (dict "fn" "ledger_max_balance()") }}
