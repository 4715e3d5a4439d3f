-- A refunded job that is deleted still takes its late result (docs/design.md, "The job state
-- machine"): deletion hides a job's content, never an obligation, so its refund can still be
-- reclaimed and its cost awaits a reclaim like any refunded job's. The lower exposure bound rests
-- on accounts.awaiting_reclaim, which deletion used to lower: the tombstones deleted before this
-- migration count again, so that every reclaim still fits the account's balance.
UPDATE accounts a SET awaiting_reclaim = a.awaiting_reclaim + t.costs, updated_at = now()
FROM (SELECT account_id, sum(cost) AS costs FROM jobs
      WHERE state = 'deleted' AND state_before_delete = 'refunded' AND is_refunded AND NOT is_reclaimed
      GROUP BY account_id) t
WHERE a.id = t.account_id;
