// The submission rules' decision table, row for row the Go client's: both read
// apiclient/testdata/submission-decisions.json, so the two clients cannot drift. The Temporal
// helper's rule for a held workflow ID is the job service's, from the same file.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CONFIRM_WINDOW_MS, decide, MAX_RESUBMISSIONS, Observation, onNotFound, onSubmitted, temporal, Tracked } from '../src';
import { DecisionRow, decisionTable, goDurationMs } from './support';

// The rows' creation time is the epoch: a millisecond count near 2026 cannot hold the table's
// "one nanosecond inside the window" as a double, one near zero can.
const CREATED = new Date(0).toISOString();

function tracked(row: DecisionRow): Tracked {
  assert.ok(['unknown', 'accepted'].includes(row.tracked.state), row.name);
  return {
    request: row.tracked.with_body
      ? { job_id: 'render-1', account_id: 'acme', kind: 'render-4k', input_ref: 'sim:ok' }
      : { job_id: '', account_id: '', kind: '' },
    created_at: CREATED,
    state: row.tracked.state,
    resubmissions: row.tracked.resubmissions,
  };
}

const table = decisionTable();

// The remembered-IDs rule: the confirmation window and the resubmission budget are the Go client's.
describe('the decision table is written for the client\'s limits', () => {
  it('five minutes to confirm, at most three resubmissions', () => {
    assert.equal(goDurationMs(table.confirm_window), CONFIRM_WINDOW_MS);
    assert.equal(table.max_resubmissions, MAX_RESUBMISSIONS);
    assert.ok(table.on_not_found.length > 0 && table.decide.length > 0);
  });
});

// The remembered-IDs rule: an ID once accepted is never charged again — the API's not_received 404
// for it means deleted, never resubmit; an ID never accepted is resubmitted under the same ID, at
// most three times, within five minutes, then reported "not received, not charged".
describe('onNotFound follows every row of the 404 table', () => {
  for (const row of table.on_not_found) {
    it(row.name, () => {
      assert.equal(row.observation, undefined);
      assert.equal(onNotFound(tracked(row), goDurationMs(row.since_created)), row.want);
    });
  }
});

// The remembered-IDs and idempotent-doors rules: transient failures and unsettled states keep
// polling the same ID and never create a new paid job; 410 is deleted; only the API's not_received
// 404 goes through the 404 table — any other 404 (a proxy's, no_route, a body that is not the
// API's) is transient.
describe('decide covers every answer', () => {
  for (const row of table.decide) {
    it(row.name, () => {
      const o = row.observation!;
      const obs: Observation =
        o.network_error !== undefined ? { error: new Error(o.network_error) } : { status_code: o.status_code, state: o.state, code: o.code };
      assert.equal(decide(tracked(row), obs, goDurationMs(row.since_created)), row.want);
    });
  }
});

// The money rule of a submission's answer: its status says where the money stands, as its body
// does (201 charged, 202 pending, 200 nothing charged by the answer). An answer whose status and job
// agree stands, and the client reports the job's money state; one whose status says more than its
// body (a 201 of a job not charged, a 202 of a job decided) is taken at neither's word — the client
// looks at the job by ID and reports its money as unknown until then. The rows are the shared
// table's on_submitted.
describe('onSubmitted follows every row of the submission-answer table', () => {
  assert.ok(table.on_submitted.length > 0);
  for (const row of table.on_submitted) {
    it(row.name, () => {
      const got = onSubmitted(row.answer.status_code, { job_id: 'render-1', account_id: 'acme', state: row.answer.state, money_state: row.answer.money_state });
      assert.deepEqual(got, { action: row.want, money_state: row.reports });
    });
  }
});

// The remembered-IDs and idempotent-doors rules, as the job service keeps them: a submission
// through Temporal whose start is refused because a workflow holds the job's ID joins the job's own
// running workflow, answers a closed one from its status without ever starting it again, and never
// sends its charge decision into another program's workflow. The rows are the shared table's
// workflow_id_held.
describe('onWorkflowIdHeld follows every row of the held-ID table', () => {
  assert.ok(table.workflow_id_held.length > 0);
  for (const row of table.workflow_id_held) {
    it(row.name, () => {
      assert.equal(temporal.onWorkflowIdHeld(row.workflow_type, row.running), row.want);
    });
  }
});
