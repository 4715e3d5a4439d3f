// The Temporal helpers against the real Temporal dev server and the jobbill worker that
// `go test ./clients/typescript` starts: each story of a job started, signalled and read through
// @temporalio/client, and checked through the API and the ledger's rows.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client as TemporalClient, WorkflowExecutionDescription, WorkflowNotFoundError } from '@temporalio/client';
import { Client, InvalidInputError, newJobId, temporal, WorkflowIdTakenError } from '../src';
import { e2e, SKIP_E2E } from './support';

const env = e2e();

/**
 * A policy that settles a job in seconds: one attempt, 30 s for a late result. The attempt may run
 * a minute and go 30 s without a heartbeat — far beyond the simulated work of half a second, so
 * that a loaded machine cannot time out work that should be delivered.
 */
const quick: temporal.Policy = {
  initial_interval: '500ms',
  maximum_attempts: 1,
  start_to_close: '1m',
  heartbeat_timeout: '30s',
  late_result_window: '30s',
};

describe('the Temporal helpers against the real Temporal and worker', { skip: env ? false : SKIP_E2E }, () => {
  let tc: TemporalClient;
  let api: Client;
  before(async () => {
    tc = await temporal.connect({ address: env!.temporalAddress, namespace: env!.temporalNamespace });
    api = new Client({ baseUrl: env!.apiUrl, key: env!.temporalKey });
  });
  after(async () => {
    await tc?.connection.close();
  });

  const input = (inputRef: string, account = env!.temporalAccount): temporal.JobInput => ({
    job_id: newJobId('ts-temporal'),
    account_id: account,
    kind: env!.kind,
    input_ref: inputRef,
    policy: quick,
  });
  const submit = (i: temporal.JobInput) => temporal.submitJob(tc, i, { taskQueue: env!.taskQueue });

  /** Queries the job's workflow until it is in state, for at most 30 s. */
  async function until(account: string, jobId: string, state: string): Promise<temporal.WorkflowJobStatus> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const st = await temporal.jobStatus(tc, account, jobId);
      if (st.state === state || Date.now() > deadline) {
        assert.equal(st.state, state, JSON.stringify(st));
        return st;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** The kinds of the account's ledger rows for one job, read through the API. */
  async function rowKinds(c: Client, account: string, jobId: string): Promise<string[]> {
    const page = await c.ledger(account, { limit: 1000 });
    return page.entries.filter((e) => e.job_id === jobId).map((e) => e.kind);
  }

  /** Waits, for at most 30 s, until the job's workflow has closed, and answers its description. */
  async function closed(account: string, jobId: string): Promise<WorkflowExecutionDescription> {
    const handle = tc.workflow.getHandle(temporal.jobWorkflowId(account, jobId));
    const deadline = Date.now() + 30_000;
    for (;;) {
      const d = await handle.describe();
      if (d.status.name !== 'RUNNING' || Date.now() > deadline) {
        assert.notEqual(d.status.name, 'RUNNING', `the workflow of ${jobId} did not close`);
        return d;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** p, or a rejection once ms have passed without its answer. */
  async function within<T>(p: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    });
    try {
      return await Promise.race([p, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  // The reversing-pairs, net-effect and idempotent-doors rules: Update-With-Start answers "charged"
  // once the charge is decided; the job is delivered and charged its price once — a second
  // submitJob while it runs sends the same update to the same workflow, and charges nothing more.
  it('delivered: submitJob answers the charge decision, and a repeat charges nothing', async () => {
    const i = input('sim:ok');
    const decision = await submit(i);
    // The job as it stands once charged: running, or delivered if its work was done before the
    // answer was read.
    assert.ok(['running', 'delivered'].includes(decision.state), decision.state);
    assert.equal(decision.money_state, 'charged');
    const again = await submit(i);
    assert.equal(again.money_state, 'charged');
    const st = await until(i.account_id, i.job_id, 'delivered');
    assert.equal(st.money_state, 'charged');
    assert.equal(st.kind, env!.kind);
    const read = await api.status(i.job_id);
    assert.equal(read.state, 'delivered');
    assert.equal(read.charged, env!.price);
    const closedOrNot = await submit(i);
    assert.equal(closedOrNot.money_state, 'charged', 'a delivered job answers its decision, charged once');
    assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), ['charge']);
  });

  // The remembered-IDs and idempotent-doors rules, as the job service keeps them: once the job's
  // workflow has closed, its ID never starts a run again (reuse policy REJECT_DUPLICATE);
  // submitting the job again answers it from the closed run's status — delivered, charged once —
  // with no second run and no new row.
  it('a closed job is answered from its status, and its ID never starts again', async () => {
    const i = input('sim:ok');
    assert.equal((await submit(i)).money_state, 'charged');
    await until(i.account_id, i.job_id, 'delivered');
    const run = await closed(i.account_id, i.job_id);
    const again = await submit(i);
    assert.deepEqual(again, { state: 'delivered', money_state: 'charged', reason: '' });
    const after = await tc.workflow.getHandle(temporal.jobWorkflowId(i.account_id, i.job_id)).describe();
    assert.equal(after.runId, run.runId, 'no second run started under the closed job\'s ID');
    assert.equal(after.status.name, run.status.name);
    assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), ['charge']);
  });

  // The remembered-IDs rule in a namespace other programs may share, as the job service keeps it:
  // when another program's workflow holds the job's workflow ID, running or closed, submitJob
  // answers at once with WorkflowIdTakenError — never waiting on, or sending the charge decision
  // into, a workflow that is not the job's, and never starting the job: nothing is charged or
  // written.
  it('another program\'s workflow under the ID: the job is not started, nothing charged', async () => {
    for (const foreignClosed of [false, true]) {
      const i = input('sim:ok');
      const workflowId = temporal.jobWorkflowId(i.account_id, i.job_id);
      const foreign = await tc.workflow.start('SomeoneElsesWorkflow', { workflowId, taskQueue: 'nobody-polls-this', args: [] });
      if (foreignClosed) {
        await foreign.terminate('done');
      }
      try {
        await assert.rejects(within(submit(i), 10_000), (err) => {
          assert.ok(err instanceof WorkflowIdTakenError, `closed=${foreignClosed}: ${err}`);
          assert.equal(err.workflowType, 'SomeoneElsesWorkflow');
          assert.equal(err.moneyState, 'not_charged');
          assert.match(err.message, /new ID/);
          return true;
        });
      } finally {
        if (!foreignClosed) {
          await foreign.terminate('test over');
        }
      }
      assert.equal((await foreign.describe()).type, 'SomeoneElsesWorkflow', 'the ID still names the foreign workflow');
      assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), []);
      await assert.rejects(api.status(i.job_id), /not_received/);
    }
  });

  // The reversing-pairs and net-effect rules: work that fails for good is refunded, the job
  // dead-lettered.
  it('refunded: the work failed for good, the charge is refunded', async () => {
    const i = input('sim:fail');
    assert.equal((await submit(i)).money_state, 'charged');
    const st = await until(i.account_id, i.job_id, 'refunded');
    assert.equal(st.money_state, 'refunded');
    assert.equal(st.dead_lettered, true);
    assert.equal((await api.status(i.job_id)).reason, 'gpu_failed');
    assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), ['charge', 'refund']);
  });

  // The reversing-pairs and net-effect rules: a result signalled after the refund reclaims it
  // exactly once: the job is recovered and charged its price; the same signal again changes
  // nothing.
  it('recovered: refunded, then a late result signalled reclaims the refund', async () => {
    const i = input('sim:fail');
    await submit(i);
    await until(i.account_id, i.job_id, 'refunded');
    const result = { attempt: 1, output_ref: 's3://results/ts-late', finished_at: new Date(), units_used: 1 };
    await temporal.signalResult(tc, i.account_id, i.job_id, result);
    const st = await until(i.account_id, i.job_id, 'recovered');
    assert.equal(st.money_state, 'charged');
    assert.equal(st.output_ref, 's3://results/ts-late');
    // The same result again changes nothing: the run answers it already applied, or, once the
    // recovered run has closed, Temporal refuses the signal (report through the API then).
    await temporal.signalResult(tc, i.account_id, i.job_id, result).catch((err) => assert.ok(err instanceof WorkflowNotFoundError, String(err)));
    const read = await api.status(i.job_id);
    assert.equal(read.state, 'recovered');
    assert.equal(read.charged, env!.price);
    assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), ['charge', 'refund', 'reclaim']);
  });

  // The remembered-IDs rule: a start for an account that cannot pay the hold is rejected, nothing
  // charged.
  it('rejected: insufficient credits, nothing charged', async () => {
    const poor = new Client({ baseUrl: env!.apiUrl, key: env!.poorKey });
    const i = input('sim:ok', env!.poorAccount);
    const decision = await submit(i);
    assert.equal(decision.state, 'rejected');
    assert.equal(decision.money_state, 'not_charged');
    assert.match(decision.reason, /insufficient credits/);
    assert.deepEqual(await rowKinds(poor, env!.poorAccount, i.job_id), []);
    assert.equal((await poor.balance(env!.poorAccount)).balance, 10);
  });

  // The price-list rule: a kind with no price cannot be billed: the run ends rejected, nothing
  // charged.
  it('rejected: an unknown kind is never charged', async () => {
    const i = { ...input('sim:ok'), kind: 'never-priced' };
    const decision = await submit(i);
    assert.equal(decision.state, 'rejected');
    assert.equal(decision.money_state, 'not_charged');
    assert.deepEqual(await rowKinds(api, i.account_id, i.job_id), []);
  });

  // Bad input gets a clear error and nothing is started or signalled: an amount (prices are set
  // by the server), an ID with a "/", an unknown policy field, a duration not in Go's form, a
  // result of attempt 0 or a negative usage.
  it('bad input is refused before anything is sent', async () => {
    const i = input('sim:ok');
    const refused: Array<[Promise<unknown>, RegExp]> = [
      [submit({ ...i, cost: 40 } as any), /prices are set by the server/],
      [submit({ ...i, job_id: 'a/b' }), /job_id/],
      [submit({ ...i, policy: { retries: 3 } as any }), /unknown field "retries"/],
      [submit({ ...i, policy: { late_result_window: '1 day' } }), /late_result_window/],
      [submit({ ...i, contract_version: 2 }), /contract_version/],
      [temporal.signalResult(tc, i.account_id, i.job_id, { attempt: 0, output_ref: 's3://x', finished_at: new Date() }), /attempt/],
      [temporal.signalResult(tc, i.account_id, i.job_id, { attempt: 1, output_ref: 's3://x', finished_at: new Date(), units_used: -1 }), /units_used/],
      [temporal.signalResult(tc, i.account_id, i.job_id, { attempt: 1, output_ref: 's3://x', finished_at: 'yesterday' }), /finished_at/],
    ];
    for (const [p, message] of refused) {
      await assert.rejects(p, (err) => err instanceof InvalidInputError && message.test(err.message));
    }
    await assert.rejects(
      tc.workflow.getHandle(temporal.jobWorkflowId(i.account_id, i.job_id)).describe(),
      WorkflowNotFoundError,
      'no workflow was started',
    );
    await assert.rejects(api.status(i.job_id), /not_received/);
  });
});
