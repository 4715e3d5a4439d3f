-- The jobs the bench submitted ($1, their ledger keys), each with its account and state, how many
-- charge, refund and reclaim rows it has, how many rows in all, and their sum (checkMoney).
SELECT j.id, j.account_id, j.state,
       count(e.id) FILTER (WHERE e.kind = 'charge'),
       count(e.id) FILTER (WHERE e.kind = 'refund'),
       count(e.id) FILTER (WHERE e.kind = 'reclaim'),
       count(e.id),
       coalesce(sum(e.amount), 0)
FROM jobs j LEFT JOIN ledger_entries e ON e.job_id = j.id
WHERE j.id = ANY($1)
GROUP BY j.id, j.account_id, j.state
