-- The check of every job of one side and lifecycle (verifyJobs): how many jobs there are, how
-- many are as wanted (on the account their client and n give, at the lifecycle's price, recovered
-- and settled at the usage read back from their ID), their rows in all, how many charges, refunds,
-- reclaims and releases, and how many jobs whose rows are not the lifecycle's.
-- $1 the side's job ID prefix, $2..$7 the price (kind, version, unit, unit price, held units,
-- metered), $8 the side's account prefix, $9 the number of accounts, $10 the accounts' stride.
WITH p AS (
    SELECT $1::text AS prefix, $2::text AS kind, $3::integer AS version, $4::text AS unit,
           $5::bigint AS unit_price, $6::bigint AS held, $7::boolean AS metered,
           $8::text AS accounts_prefix, $9::bigint AS accounts, $10::bigint AS stride
), j AS (
    SELECT jobs.id, jobs.cost, nullif((p.held - w.used) * p.unit_price, 0) AS release,
           jobs.account_id = p.accounts_prefix || ((w.client + w.n * p.stride) % p.accounts)::text
             AND jobs.kind = p.kind AND jobs.price_version = p.version AND jobs.unit = p.unit
             AND jobs.unit_price = p.unit_price AND jobs.held_units = p.held AND jobs.cost = p.unit_price * p.held
             AND jobs.state = 'recovered' AND jobs.is_charged AND jobs.is_refunded AND jobs.is_reclaimed
             AND jobs.is_settled AND jobs.units_used = w.used AS sound
    FROM p, jobs,
         LATERAL (SELECT split_part(jobs.id, '-', -2)::bigint AS client, split_part(jobs.id, '-', -1)::bigint AS n) k,
         LATERAL (SELECT k.client, k.n, CASE WHEN p.metered THEN k.n % p.held ELSE p.held END AS used) w
    WHERE starts_with(jobs.account_id, p.accounts_prefix) AND starts_with(jobs.id, jobs.account_id || '/' || p.prefix)
), e AS (
    SELECT e.job_id, count(*) AS n,
           sum(e.amount) FILTER (WHERE e.kind = 'charge') AS charge,
           sum(e.amount) FILTER (WHERE e.kind = 'refund') AS refund,
           sum(e.amount) FILTER (WHERE e.kind = 'reclaim') AS reclaim,
           sum(e.amount) FILTER (WHERE e.kind = 'release') AS release
    FROM ledger_entries e JOIN j ON j.id = e.job_id GROUP BY e.job_id
)
SELECT (SELECT count(*) FROM j),
       (SELECT count(*) FROM j WHERE sound),
       coalesce((SELECT sum(n) FROM e), 0),
       (SELECT count(charge) FROM e), (SELECT count(refund) FROM e),
       (SELECT count(reclaim) FROM e), (SELECT count(release) FROM e),
       (SELECT count(*) FROM j LEFT JOIN e ON e.job_id = j.id
        WHERE e.n IS DISTINCT FROM 3 + (j.release IS NOT NULL)::int
           OR e.charge IS DISTINCT FROM -j.cost OR e.refund IS DISTINCT FROM j.cost
           OR e.reclaim IS DISTINCT FROM -j.cost OR e.release IS DISTINCT FROM j.release)
