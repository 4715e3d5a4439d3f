// The HTTP client against the real API, Postgres ledger, Temporal dev server and worker that
// `go test ./clients/typescript` starts: each story of a job, told to the user through the client,
// and checked in the ledger's rows.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { APIError, Client, InsufficientCreditsError, InvalidInputError, JobDeletedError, JobStatus, newJobId, ResultConflictError } from '../src';
import { e2e, SKIP_E2E } from './support';

const env = e2e();

/** The kinds of an account's ledger rows for one job, oldest first. */
async function rowKinds(c: Client, account: string, jobId: string): Promise<string[]> {
  const kinds: string[] = [];
  let after = 0;
  for (;;) {
    const page = await c.ledger(account, { after, limit: 1000 });
    kinds.push(...page.entries.filter((e) => e.job_id === jobId).map((e) => e.kind));
    if (!page.next_after) {
      return kinds;
    }
    after = page.next_after;
  }
}

/** Reads the job until it is in state, for at most 30 s. */
async function until(c: Client, jobId: string, state: string): Promise<JobStatus> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const st = await c.status(jobId);
    if (st.state === state || Date.now() > deadline) {
      assert.equal(st.state, state, JSON.stringify(st));
      return st;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the HTTP client against the real API', { skip: env ? false : SKIP_E2E }, () => {
  const customer = () => new Client({ baseUrl: env!.apiUrl, key: env!.customerKey, pollIntervalMs: 200 });
  const job = (input: string) => ({ job_id: newJobId('ts'), account_id: env!.account, kind: env!.kind, input_ref: input });

  // The reversing-pairs, net-effect and idempotent-doors rules: a delivered job is charged its
  // price once — a second submission of the same body under the same ID answers the same job and
  // charges nothing more.
  it('delivered: charged once, however often it is submitted', async () => {
    const c = customer();
    const body = job('sim:ok');
    const st = await c.run(c.track(body));
    assert.equal(st.state, 'delivered');
    assert.equal(st.money_state, 'charged');
    assert.equal(st.charged, env!.price);
    const again = await c.run(c.track(body));
    assert.equal(again.state, 'delivered');
    assert.deepEqual(await rowKinds(c, env!.account, body.job_id), ['charge']);
  });

  // The reversing-pairs and net-effect rules: work that fails for good is refunded its whole hold;
  // the user reads "refunded" with the reason code of the failure, never its words.
  it('refunded: the work failed for good, the charge is refunded', async () => {
    const c = customer();
    const body = job('sim:fail');
    const st = await c.run(c.track(body));
    assert.equal(st.state, 'refunded');
    assert.equal(st.money_state, 'refunded');
    assert.equal(st.reason, 'gpu_failed');
    assert.equal(st.charged, 0);
    assert.deepEqual(await rowKinds(c, env!.account, body.job_id), ['charge', 'refund']);
  });

  // The reversing-pairs and net-effect rules: a result that lands after the refund (reported by the
  // GPU service with a runner key) reclaims the refund exactly once: the job is recovered and
  // charged its price. A different result of the same attempt is a ResultConflictError in the
  // result's own words (the first result stands, nothing was charged again — never a submission's
  // "use a new ID"), and writes nothing.
  it('recovered: refunded, then a late result reclaims the refund', async () => {
    const c = customer();
    const body = job('sim:fail');
    const st = await c.run(c.track(body));
    assert.equal(st.state, 'refunded');
    const runner = new Client({ baseUrl: env!.apiUrl, key: env!.runnerKey, accountId: env!.account });
    const answer = await runner.reportResult(body.job_id, { attempt: 1, output_ref: 's3://results/late', units_used: 1 });
    assert.ok(['signal', 'fallback'].includes(answer.path), answer.path);
    const recovered = await until(c, body.job_id, 'recovered');
    assert.equal(recovered.money_state, 'charged');
    assert.equal(recovered.charged, env!.price);
    assert.equal(recovered.output_ref, 's3://results/late');
    const again = await runner.reportResult(body.job_id, { attempt: 1, output_ref: 's3://results/late', units_used: 1 });
    assert.equal(again.path, 'already_applied', 'the same result again changes nothing');
    await assert.rejects(runner.reportResult(body.job_id, { attempt: 1, output_ref: 's3://results/other', units_used: 1 }), (err) => {
      assert.ok(err instanceof ResultConflictError, String(err));
      assert.ok(err instanceof APIError);
      assert.equal(err.statusCode, 409);
      assert.equal(err.code, 'conflict');
      assert.match(err.apiMessage, /^This attempt already reported a different result .*The first result stands.*nothing was charged again\.$/);
      assert.doesNotMatch(err.message, /new ID/);
      assert.equal(err.moneyState, 'charged');
      return true;
    });
    assert.equal((await c.status(body.job_id)).output_ref, 's3://results/late', 'the first result stands');
    assert.deepEqual(await rowKinds(c, env!.account, body.job_id), ['charge', 'refund', 'reclaim']);
  });

  // The remembered-IDs rule: an account that cannot pay the hold gets the job rejected, nothing
  // charged, and the ID burnt: the same tracked job answers the same without being sent again.
  it('rejected: insufficient credits, nothing charged', async () => {
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.poorKey, pollIntervalMs: 200 });
    const t = c.track({ job_id: newJobId('ts'), account_id: env!.poorAccount, kind: env!.kind, input_ref: 'sim:ok' });
    await assert.rejects(c.run(t), (err) => {
      assert.ok(err instanceof InsufficientCreditsError);
      assert.equal(err.status.state, 'rejected');
      assert.equal(err.status.money_state, 'not_charged');
      assert.equal(err.status.reason, 'insufficient_credits');
      return true;
    });
    await assert.rejects(c.run(t), InsufficientCreditsError);
    assert.deepEqual(await rowKinds(c, env!.poorAccount, t.request.job_id), []);
    assert.equal((await c.balance(env!.poorAccount)).balance, 10);
  });

  // The credit-block rules as a customer reads them: promotional credits are spent before paid
  // ones, so the promotional block comes first; each block says what it holds; the blocks hold the
  // balance; and the statement adds up — opening + lines = closing, grants split by category.
  it('blocks and statement: the account\'s credits block by block, and a statement that adds up', async () => {
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.blocksKey });
    const list = await c.blocks(env!.blocksAccount);
    assert.equal(list.account_id, env!.blocksAccount);
    const granted = list.blocks.filter((b) => !b.opening);
    assert.deepEqual(granted.map((b) => [b.category, b.amount, b.remaining, b.cost_basis, b.spendable]), [
      ['promotional', 20, 20, undefined, true],
      ['paid', 100, 100, '0.01', true],
    ]);
    const balance = (await c.balance(env!.blocksAccount)).balance;
    assert.equal(list.blocks.reduce((sum, b) => sum + b.remaining, 0), balance);

    const st = await c.statement(env!.blocksAccount, new Date(Date.UTC(2020, 0, 1)), new Date(Date.now() + 3_600_000));
    assert.equal(st.opening, 0);
    assert.equal(st.closing, balance);
    assert.equal(st.opening + st.lines.reduce((sum, l) => sum + l.amount, 0), st.closing);
    assert.deepEqual(st.lines.map((l) => [l.kind, l.category, l.amount]), [
      ['grant', 'paid', 100],
      ['grant', 'promotional', 20],
    ]);
    assert.equal(st.status, 'provisional', 'a period that has not ended');
    await assert.rejects(c.statement(env!.blocksAccount, new Date(), new Date(0)), InvalidInputError);
    await assert.rejects(c.blocks(env!.account), (err) => err instanceof APIError && err.statusCode === 403);
  });

  // The price-list rule and "nothing written": a kind with no price is the API's 422 unknown_kind,
  // and the ID never reached the ledger (404 not_received, not charged).
  it('rejected: an unknown kind is refused and nothing is written', async () => {
    const c = customer();
    const t = c.track({ job_id: newJobId('ts'), account_id: env!.account, kind: 'never-priced', input_ref: 'sim:ok' });
    await assert.rejects(c.run(t), (err) => err instanceof APIError && err.statusCode === 422 && err.code === 'unknown_kind');
    await assert.rejects(c.status(t.request.job_id), (err) => err instanceof APIError && err.code === 'not_received' && err.moneyState === 'not_charged');
  });

  // Delivered work is never lost for want of Temporal: a result reported while the API cannot reach
  // its workflow service is recorded in the ledger (202, path "recorded") for the reconcile pass to
  // apply (the Go test checks the inbox afterwards).
  it('a result reported while Temporal is down is recorded', async () => {
    const runner = new Client({ baseUrl: env!.downApiUrl, key: env!.runnerKey, accountId: env!.account });
    const answer = await runner.reportResult(env!.downJobId, { attempt: 1, output_ref: 's3://results/down' });
    assert.equal(answer.path, 'recorded', answer.message);
    assert.equal(answer.status.job_id, env!.downJobId);
  });

  // Bad input gets a clear error and writes nothing: an amount is refused by the client before
  // it is sent, and the server never heard of the ID.
  it('bad input: an amount is refused before sending, nothing written', async () => {
    const c = customer();
    const id = newJobId('ts');
    assert.throws(() => c.track({ ...job('sim:ok'), job_id: id, cost: 1 } as any), /prices are set by the server/);
    await assert.rejects(c.status(id), (err) => err instanceof APIError && err.code === 'not_received');
    await assert.rejects(c.reportResult(id, { attempt: 0, output_ref: 's3://x' }), InvalidInputError);
  });
});

describe('the decision table against the real API', { skip: env ? false : SKIP_E2E }, () => {
  const job = () => ({ job_id: newJobId('ts'), account_id: env!.account, kind: env!.kind, input_ref: 'sim:ok' });

  // The remembered-IDs rule: a POST lost on its way (a network error) leaves the submission
  // unknown; the API's not_received 404 then resubmits the saved body under the same ID, and the
  // job is charged once.
  it('a lost submission is confirmed by GET and resubmitted under the same ID', async () => {
    let dropped = 0;
    const dropFirstPost: typeof fetch = async (input, init) => {
      if (init?.method === 'POST' && dropped === 0) {
        dropped++;
        throw new TypeError('fetch failed: connection reset');
      }
      return fetch(input, init);
    };
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.customerKey, pollIntervalMs: 200, submitAttempts: 1, fetch: dropFirstPost, backoff: { initialMs: 50 } });
    const t = c.track(job());
    const st = await c.run(t);
    assert.equal(st.state, 'delivered');
    assert.equal(t.resubmissions, 1);
    assert.deepEqual(await rowKinds(c, env!.account, t.request.job_id), ['charge']);
  });

  // The idempotent-doors rule: a submission whose answer was lost (the server took it) is confirmed
  // by a look, never sent again under a new ID: one charge, no resubmission.
  it('a lost answer is confirmed by GET, not resubmitted', async () => {
    const loseFirstAnswer: typeof fetch = async (input, init) => {
      const resp = await fetch(input, init);
      if (init?.method === 'POST') {
        await resp.text();
        throw new TypeError('fetch failed: the answer was lost');
      }
      return resp;
    };
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.customerKey, pollIntervalMs: 200, submitAttempts: 1, fetch: loseFirstAnswer });
    const t = c.track(job());
    const st = await c.run(t);
    assert.equal(st.state, 'delivered');
    assert.equal(t.resubmissions, 0);
    assert.deepEqual(await rowKinds(c, env!.account, t.request.job_id), ['charge']);
  });

  // The remembered-IDs rule: a 404 that is not the API's not_received (here the API's no_route, for
  // a misconfigured base path) says nothing about the job: the client keeps asking and never
  // reports "not received, not charged"; nothing reached the ledger.
  it('a 404 that is not the API\'s not_received is transient', async () => {
    const c = new Client({ baseUrl: `${env!.apiUrl}/misrouted`, key: env!.customerKey, pollIntervalMs: 100, backoff: { initialMs: 50, maxMs: 200 } });
    const t = c.track(job());
    await assert.rejects(c.run(t, { signal: AbortSignal.timeout(1500) }), (err: any) => err?.name === 'TimeoutError');
    assert.equal(t.state, 'unknown');
    assert.equal(t.resubmissions, 0);
    const direct = new Client({ baseUrl: env!.apiUrl, key: env!.customerKey });
    await assert.rejects(direct.status(t.request.job_id), (err) => err instanceof APIError && err.code === 'not_received');
  });

  // The remembered-IDs rule: a deleted job keeps its money state and its ID is burnt — polled again
  // it is JobDeletedError with money charged (410), and a resubmission of the same body is refused
  // (410) with nothing charged again.
  it('deleted: never resubmitted, the money state kept', async () => {
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.customerKey, pollIntervalMs: 200 });
    const body = job();
    const t = c.track(body);
    assert.equal((await c.run(t)).state, 'delivered');
    const tomb = await c.deleteJob(body.job_id);
    assert.equal(tomb.state, 'deleted');
    assert.equal(tomb.money_state, 'charged');
    await assert.rejects(c.poll(t), (err) => err instanceof JobDeletedError && err.status.money_state === 'charged');
    await assert.rejects(c.run(c.track(body)), (err) => err instanceof JobDeletedError && err.status.money_state === 'charged');
    assert.deepEqual(await rowKinds(c, env!.account, body.job_id), ['charge']);
  });
});

describe('the start-job example against the real API', { skip: env ? false : SKIP_E2E }, () => {
  // The README's example starts a job that is delivered and charged once, and prints where the
  // money stands (the net-effect and remembered-IDs rules).
  it('starts a job and prints it delivered, charged', async () => {
    const script = path.join(__dirname, '..', 'examples', 'start-job.js');
    const { stdout } = await promisify(execFile)(process.execPath, [script, env!.account, env!.kind, 'sim:ok'], {
      env: { ...process.env, JOBBILL_API_URL: env!.apiUrl, JOBBILL_KEY: env!.customerKey },
    });
    const m = /^(render-[a-z2-7]{26}): delivered, charged — Done\./.exec(stdout);
    assert.ok(m, stdout);
    const c = new Client({ baseUrl: env!.apiUrl, key: env!.customerKey });
    assert.deepEqual(await rowKinds(c, env!.account, m[1]), ['charge']);
  });
});
