// The HTTP client against a local server whose answers each test scripts, with a clock that
// moves by what the client waits for — the Go client's tests (apiclient/*_test.go), in TypeScript.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  APIError,
  Backoff,
  Client,
  InsufficientCreditsError,
  InvalidInputError,
  JobDeletedError,
  MAX_RESUBMISSIONS,
  CONFIRM_WINDOW_MS,
  newJobId,
  NotReceivedError,
  parseRetryAfter,
} from '../src';
import { FakeClock, reply, scriptedServer } from './support';

const body = { job_id: 'render-1', account_id: 'acme', kind: 'render-4k', input_ref: 'sim:ok' };

describe('the submission rules against a scripted server', () => {
  // The remembered-IDs rule: a server that never receives anything (every POST lost, every GET the
  // API's not_received) gets the same ID and body exactly MAX_RESUBMISSIONS more times, and after
  // five minutes the user is told "not received, not charged" — never a new ID.
  it('a submission never received is resubmitted three times, then reported not received', async () => {
    const srv = await scriptedServer((req, res) => {
      if (req.method === 'POST') {
        reply(res, 502);
        return;
      }
      reply(res, 404, { code: 'not_received', message: 'Not received', money_state: 'not_charged' });
    });
    try {
      const clock = new FakeClock();
      const c = new Client({ baseUrl: srv.url, key: 'k', clock, pollIntervalMs: 10_000, submitAttempts: 2 });
      const t = c.track(body);
      await assert.rejects(c.run(t), (err) => err instanceof NotReceivedError && err.moneyState === 'not_charged');
      const posts = srv.received.filter((r) => r.method === 'POST');
      assert.equal(posts.length, 2 + MAX_RESUBMISSIONS, '2 submit attempts, then 3 resubmissions');
      assert.equal(new Set(posts.map((p) => p.body)).size, 1, 'every POST carried the same saved body and ID');
      assert.deepEqual(JSON.parse(posts[0].body), body);
      const elapsed = clock.now() - Date.parse(t.created_at);
      assert.ok(elapsed >= CONFIRM_WINDOW_MS && elapsed < CONFIRM_WINDOW_MS + 60_000, `${elapsed} ms`);
    } finally {
      await srv.close();
    }
  });

  // Slow is not failed: 502, 429, a dropped connection and a submitting job keep the client
  // polling the same ID, and an accepted ID is never submitted again.
  it('slow and flaky reads keep polling the same ID', async () => {
    const answers = [
      (res: any) => reply(res, 502),
      (res: any) => reply(res, 429),
      (res: any) => res.socket.destroy(),
      (res: any) => reply(res, 200, { job_id: 'render-1', state: 'submitting', money_state: 'pending' }),
      (res: any) => reply(res, 503),
      (res: any) => reply(res, 200, { job_id: 'render-1', state: 'running', money_state: 'charged' }),
      (res: any) => reply(res, 200, { job_id: 'render-1', state: 'delivered', money_state: 'charged' }),
    ];
    let gets = 0;
    const srv = await scriptedServer((req, res) => {
      if (req.method === 'POST') {
        reply(res, 202, { status: { job_id: 'render-1', state: 'submitting', money_state: 'pending' } });
        return;
      }
      answers[Math.min(gets++, answers.length - 1)](res);
    });
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
      const st = await c.run(c.track(body));
      assert.equal(st.state, 'delivered');
      assert.equal(st.money_state, 'charged');
      assert.equal(srv.received.filter((r) => r.method === 'POST').length, 1, 'an accepted job is never submitted again');
      assert.equal(gets, answers.length);
    } finally {
      await srv.close();
    }
  });

  // The remembered-IDs rule: only the API's own not_received says a job never arrived. A proxy's
  // 404, the API's no_route, an empty 404 or JSON of another shape says nothing: no resubmission,
  // no "not received", even past the confirmation window — the client asks again under the same ID.
  it('only the API\'s not_received means never arrived', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const foreign = [
      (res: any) => {
        res.writeHead(404, { 'Content-Type': 'text/html' });
        res.end('<html><body><h1>404 Not Found</h1>nginx</body></html>');
      },
      (res: any) => reply(res, 404, { code: 'no_route', message: "No such path; the API's paths start with /v1/." }),
      (res: any) => reply(res, 404),
      (res: any) => reply(res, 404, { error: 'not found', status: 404 }),
    ];
    let gets = 0;
    let oneRead: number | undefined;
    const srv = await scriptedServer((req, res) => {
      if (oneRead !== undefined) {
        foreign[oneRead](res);
        return;
      }
      if (req.method === 'POST') {
        foreign[1](res);
        return;
      }
      if (clock.now() < start + CONFIRM_WINDOW_MS + 60_000) {
        foreign[gets++ % foreign.length](res);
        return;
      }
      reply(res, 200, { job_id: 'render-1', state: 'delivered', money_state: 'charged' });
    });
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock, pollIntervalMs: 10_000, submitAttempts: 2 });
      const t = c.track(body);
      const st = await c.run(t);
      assert.equal(st.state, 'delivered');
      assert.equal(srv.received.filter((r) => r.method === 'POST').length, 2, 'the submit attempts only');
      assert.equal(t.resubmissions, 0);
      // One read: a foreign 404 is an error whose money state is unknown, never "not charged".
      for (let i = 0; i < foreign.length; i++) {
        oneRead = i;
        await assert.rejects(c.status('render-1'), (err) => {
          assert.ok(err instanceof APIError);
          assert.equal(err.statusCode, 404);
          assert.notEqual(err.code, 'not_received');
          assert.equal(err.moneyState, 'unknown');
          return true;
        });
      }
    } finally {
      await srv.close();
    }
  });

  // The remembered-IDs rule from the user's side: a 410 to a submission is a job accepted once and
  // deleted; the client reports the money state the answer carries, "unknown" when it carries none
  // — never "not charged" by default — and never sends the ID again.
  it('a 410 keeps the money state the answer carries', async () => {
    for (const [answer, want] of [
      [{ code: 'deleted', message: 'Deleted.', money_state: 'charged', state: 'deleted' }, 'charged'],
      [{ code: 'deleted', message: 'Deleted.', money_state: 'refunded', state: 'deleted' }, 'refunded'],
      [{ code: 'deleted', message: 'This job was deleted.' }, 'unknown'],
    ] as const) {
      const srv = await scriptedServer((_req, res) => reply(res, 410, answer));
      try {
        const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock(), submitAttempts: 1 });
        const t = c.track(body);
        await assert.rejects(c.run(t), (err) => err instanceof JobDeletedError && err.status.money_state === want && err.status.state === 'deleted');
        assert.equal(t.state, 'accepted');
        const before = srv.received.length;
        await assert.rejects(c.run(t), JobDeletedError);
        assert.equal(srv.received.length, before, 'a tracked deleted job is not sent again');
      } finally {
        await srv.close();
      }
    }
  });

  // The remembered-IDs rule: the API's not_received for an ID it once accepted means the record was
  // deleted: reported deleted, never resubmitted, its money state unknown (the 404's "not charged"
  // is about an ID the server never saw).
  it('accepted, then not_received, is deleted with its money unknown', async () => {
    const srv = await scriptedServer((req, res) => {
      if (req.method === 'POST') {
        reply(res, 201, { status: { job_id: 'render-1', state: 'running', money_state: 'charged' } });
        return;
      }
      reply(res, 404, { code: 'not_received', message: 'Not received', money_state: 'not_charged' });
    });
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
      await assert.rejects(c.run(c.track(body)), (err) => err instanceof JobDeletedError && err.status.money_state === 'unknown');
      assert.equal(srv.received.filter((r) => r.method === 'POST').length, 1);
    } finally {
      await srv.close();
    }
  });

  // The price-list rule: the body names a kind and never an amount, on every resubmission too; a
  // 402 is rejected with nothing charged, and the tracked job answers the same without being sent
  // again.
  it('a submission names a kind, never an amount; a 402 is rejected, not charged', async () => {
    let posts = 0;
    const srv = await scriptedServer((_req, res) => {
      if (++posts === 1) {
        reply(res, 502);
        return;
      }
      reply(res, 402, { code: 'insufficient_credits', message: 'Not started', money_state: 'not_charged' });
    });
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
      const t = c.track({ job_id: 'tr-1', account_id: 'acme', kind: 'transcribe', max_units: 120, input_ref: 's3://in' });
      await assert.rejects(c.run(t), (err) => err instanceof InsufficientCreditsError && err.status.money_state === 'not_charged' && err.status.state === 'rejected');
      await assert.rejects(c.run(t), InsufficientCreditsError);
      assert.equal(srv.received.length, 2);
      for (const r of srv.received) {
        assert.deepEqual(JSON.parse(r.body), { job_id: 'tr-1', account_id: 'acme', kind: 'transcribe', max_units: 120, input_ref: 's3://in' });
      }
    } finally {
      await srv.close();
    }
  });

  // The remembered-IDs rule: a submission answered with a rejected job (the same ID sent again
  // after its rejection) is InsufficientCreditsError whether the POST or a look told it — never a
  // settled job the caller might read as done.
  it('a rejected job in the submission\'s answer is an error, not charged', async () => {
    const rejected = { job_id: 'render-1', state: 'rejected', money_state: 'not_charged', reason: 'insufficient_credits' };
    const srv = await scriptedServer((_req, res) => reply(res, 200, { status: rejected, duplicate: true }));
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
      await assert.rejects(c.run(c.track(body)), (err) => err instanceof InsufficientCreditsError && err.status.money_state === 'not_charged');
      assert.equal(srv.received.length, 1, 'answered by the POST alone');
    } finally {
      await srv.close();
    }
  });

  // The money rule of a submission's answer: its status says where the money stands, as its body
  // does. A 200 whose job was refunded before the answer (its workflow stopped as the charge
  // committed) is done: run resolves to it refunded, with no further look, never charged. A 201
  // whose job is not charged says more than its body, which the API never answers: it is taken at
  // neither's word — submit reports the money unknown, and run looks at the job by ID, whose answer
  // then stands.
  it('a submission\'s status follows its money: a 200 refunded is done, a 201 not charged is looked at', async () => {
    const refunded = { job_id: 'render-1', account_id: 'acme', state: 'refunded', money_state: 'refunded', reason: 'stopped_by_operator' };
    for (const [code, looks] of [[200, 0], [201, 1]]) {
      const srv = await scriptedServer((req, res) => {
        if (req.method === 'GET') {
          reply(res, 200, refunded);
          return;
        }
        reply(res, code, { status: refunded, duplicate: false });
      });
      try {
        const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
        const t = c.track(body);
        if (code === 201) {
          const told = await c.submit(t);
          assert.equal(told?.money_state, 'unknown', 'a 201 that says more than its body is not taken at its word');
          assert.equal(t.state, 'accepted', 'the ID was accepted: it is never sent again');
        }
        const st = await c.run(t);
        assert.equal(st.state, 'refunded');
        assert.equal(st.money_state, 'refunded', `${code}: never charged, the charge was given back`);
        assert.equal(st.reason, 'stopped_by_operator');
        assert.equal(srv.received.filter((r) => r.method === 'GET').length, looks, `${code}: looks by ID`);
        assert.equal(srv.received.filter((r) => r.method === 'POST').length, 1, `${code}: posted once`);
      } finally {
        await srv.close();
      }
    }
  });

  // Bad input gets a clear error and nothing is sent: an amount under any name (prices are set by
  // the server), an unknown field, an ID with a "/", an upper-case kind, a fractional max_units,
  // an empty job ID to read, a negative usage.
  it('bad input is refused before anything is sent', async () => {
    const srv = await scriptedServer((_req, res) => reply(res, 500));
    try {
      const c = new Client({ baseUrl: srv.url, key: 'k', clock: new FakeClock() });
      const bad: Array<[unknown, RegExp]> = [
        [{ ...body, cost: 40 }, /prices are set by the server/],
        [{ ...body, Amount: 1 }, /prices are set by the server/],
        [{ ...body, max_unit: 5 }, /unknown field "max_unit"/],
        [{ ...body, job_id: 'acme/render-1' }, /job_id/],
        [{ ...body, kind: 'Render-4K' }, /kind/],
        [{ ...body, max_units: 1.5 }, /max_units/],
        [{ ...body, input_ref: 'a\u0000b' }, /input_ref/],
      ];
      for (const [b, message] of bad) {
        assert.throws(() => c.track(b as any), (err) => err instanceof InvalidInputError && message.test(err.message));
      }
      await assert.rejects(c.status(''), InvalidInputError);
      await assert.rejects(c.deleteJob(''), InvalidInputError);
      await assert.rejects(c.reportResult('render-1', { attempt: 1, output_ref: 's3://out', units_used: -1 }), /units_used/);
      await assert.rejects(c.reportResult('render-1', { attempt: 1, output_ref: 's3://out', cost: 3 } as any), /prices are set by the server/);
      await assert.rejects(c.listJobs({ limit: -1 }), InvalidInputError);
      assert.throws(() => newJobId('bad/prefix'), InvalidInputError);
      assert.equal(srv.received.length, 0, 'nothing was sent');
    } finally {
      await srv.close();
    }
  });
});

describe('backoff and job IDs', () => {
  // Retries are spaced with full jitter and never sooner than a Retry-After, capped at five minutes.
  it('full jitter, Retry-After as a floor', () => {
    const top = new Backoff({ random: () => 0.999999999 });
    assert.equal(top.delay(0), 500);
    assert.equal(top.delay(1), 1000);
    assert.equal(top.delay(10), 30_000);
    const none = new Backoff({ random: () => 0 });
    assert.equal(none.delay(3), 0);
    assert.equal(none.delay(3, 7000), 7000);
    assert.equal(none.delay(0, 3_600_000), 300_000);
    const now = Date.UTC(2026, 0, 1);
    assert.equal(parseRetryAfter('7', now), 7000);
    assert.equal(parseRetryAfter(new Date(now + 9000).toUTCString(), now), 9000);
    assert.equal(parseRetryAfter('soon', now), 0);
  });

  // The remembered-IDs rule: an ID is 128 random bits, so no two jobs share one.
  it('a job ID is the prefix and 26 random base32 characters', () => {
    const a = newJobId('render');
    assert.match(a, /^render-[a-z2-7]{26}$/);
    assert.notEqual(a, newJobId('render'));
    assert.match(newJobId(), /^[a-z2-7]{26}$/);
  });
});
