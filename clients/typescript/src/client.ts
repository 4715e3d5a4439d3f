// A client of jobbill's HTTP API that follows the submission rules (docs/design.md,
// "Submission"; the decision table in docs/api.md), as the Go client apiclient does, so that
// product code cannot get a paid job's state wrong:
//
//   - A submission names the job's kind, never an amount.
//   - A job ID is made once ({@link newJobId}) and every retry goes under it, with the saved body.
//   - A submission whose answer was lost is confirmed by GET. Only the API's own not_received 404
//     means it never arrived; it is resubmitted (same ID, same body) at most three times, and five
//     minutes after its creation the user is told "not received by the server, not charged".
//   - 408, 429, 5xx, network errors and answers that are not the API's are transient: ask again
//     under the same ID after a backoff, never sooner than a Retry-After.
//   - A 410, or the API's not_received 404 for an ID once accepted, means deleted: never
//     resubmitted, and the money state is the answer's or "unknown" — never "not charged" by default.

import { Backoff, BackoffOptions, parseRetryAfter } from './backoff';
import { Action, CODE_INSUFFICIENT_CREDITS, decide, isTransient, isTransientStatus, Observation, onSubmitted, Tracked } from './decide';
import { APIError, InsufficientCreditsError, InvalidInputError, JobDeletedError, NotReceivedError, ResultConflictError } from './errors';
import {
  Account,
  BlockList,
  JobPage,
  JobRequest,
  JobStatus,
  LedgerPage,
  ListOptions,
  MONEY_UNKNOWN,
  Price,
  Statement,
  ResultAnswer,
  ResultReport,
} from './types';
import { checkCount, checkId, checkKeys, checkKind, checkSubmission, checkText } from './validate';

/** The client's only source of time and only way to wait, so tests move time instead of taking it. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves once ms have passed; rejects when signal aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock. */
export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** Options of a {@link Client}; the optional ones take the Go client's defaults. */
export interface ClientOptions {
  /** The API's base URL (http://127.0.0.1:8080). */
  baseUrl: string;
  /**
   * The API key's secret. Its scope decides what the client may call: a customer key submits and
   * follows its account's jobs; only a runner (or admin) key reports results.
   */
  key: string;
  /**
   * Sent as account_id on the job routes that name no account of their own (listJobs, status,
   * deleteJob, reportResult): a runner or admin key must say which account it acts for. A tracked
   * job is always looked at in its own account, the one its body names.
   */
  accountId?: string;
  /** The wait between two looks at a job still being worked on; 1 s when left out. */
  pollIntervalMs?: number;
  /** How often one submission is sent while it fails transiently before polling confirms it; 3. */
  submitAttempts?: number;
  /** How long one request may take; 60 s when left out (a submission waits for its charge decision). */
  requestTimeoutMs?: number;
  /** Spacing of retries after transient failures. */
  backoff?: BackoffOptions;
  /** The time source and sleeper; the real clock when left out. */
  clock?: Clock;
  /** The fetch to send requests with; the global fetch when left out. */
  fetch?: typeof fetch;
}

/** Options of one call: an AbortSignal bounds it (the tracked job stays tracked: poll it later). */
export interface CallOptions {
  signal?: AbortSignal;
}

/** One HTTP answer as the client reads it. */
interface Answer {
  code: number;
  body: string;
  /** The wait a 429 or 503 asked for; 0 when none. */
  retryAfterMs: number;
}

/** What one POST of a submission came to. */
interface Sent {
  status?: JobStatus;
  /** What to do after an answer that accepted the job ({@link onSubmitted}). */
  action?: Action;
  /** The submission's fate is still unknown: send it again under the same ID, or confirm by polling. */
  transient: boolean;
  retryAfterMs: number;
}

const STATE_DELETED = 'deleted';
const STATE_REJECTED = 'rejected';
const MONEY_NOT_CHARGED = 'not_charged';
/** What the user reads when the API no longer knows an ID it once accepted. */
const MSG_GONE_AFTER_ACCEPTED =
  "The job was accepted earlier and its record is gone: it was deleted. Deleting moves no money, and a refunded job's late result may still take its refund back; the client cannot tell where it stands.";

/** A client of one jobbill API with one key. */
export class Client {
  private readonly baseUrl: string;
  private readonly key: string;
  private readonly accountId: string | undefined;
  private readonly pollIntervalMs: number;
  private readonly submitAttempts: number;
  private readonly requestTimeoutMs: number;
  private readonly backoff: Backoff;
  private readonly clock: Clock;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    if (typeof opts?.baseUrl !== 'string' || !/^https?:\/\//.test(opts.baseUrl)) {
      throw new InvalidInputError(`baseUrl ${JSON.stringify(opts?.baseUrl)} must be an http:// or https:// URL`);
    }
    if (typeof opts.key !== 'string' || opts.key === '') {
      throw new InvalidInputError('key must be the secret of an API key');
    }
    if (opts.accountId !== undefined) {
      checkId('accountId', opts.accountId);
    }
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.key = opts.key;
    this.accountId = opts.accountId;
    this.pollIntervalMs = opts.pollIntervalMs && opts.pollIntervalMs > 0 ? opts.pollIntervalMs : 1000;
    this.submitAttempts = opts.submitAttempts && opts.submitAttempts > 0 ? opts.submitAttempts : 3;
    this.requestTimeoutMs = opts.requestTimeoutMs && opts.requestTimeoutMs > 0 ? opts.requestTimeoutMs : 60_000;
    this.backoff = new Backoff(opts.backoff);
    this.clock = opts.clock ?? realClock;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  /**
   * Starts tracking a new submission: checks the body, saves it and the creation time. Persist the
   * result beside the job (it is plain JSON) if it must survive a restart. A body the server would
   * refuse — an amount under any name, an unknown field, a bad ID, kind or max_units — throws
   * {@link InvalidInputError}, and nothing is sent.
   */
  track(request: JobRequest): Tracked {
    checkSubmission('the submission', request);
    return {
      request: { ...request },
      created_at: new Date(this.clock.now()).toISOString(),
      state: 'unknown',
      resubmissions: 0,
    };
  }

  /**
   * The whole flow for one job: submit, then poll until it is settled. Resolves to the settled
   * status (delivered, recovered or refunded: its money_state says where the money stands);
   * rejects with {@link InsufficientCreditsError} (rejected, not charged), {@link JobDeletedError},
   * {@link NotReceivedError}, an {@link APIError}, or the signal's reason — the job is then still
   * tracked: poll it again later, never resubmit it under a new ID.
   */
  async run(t: Tracked, opts: CallOptions = {}): Promise<JobStatus> {
    const { status, action, retryAfterMs } = await this.submitOnce(t, opts);
    if (status && action === 'done') {
      if (status.state === STATE_REJECTED) {
        // Answered as poll answers it: a rejected job is an error that says nothing was charged.
        throw new InsufficientCreditsError(status);
      }
      return status;
    }
    if (status && action === 'deleted') {
      throw new JobDeletedError(status);
    }
    if (retryAfterMs > 0) {
      // The last attempt was asked to wait: the first look waits too.
      await this.clock.sleep(this.backoff.honour(retryAfterMs), opts.signal);
    }
    return this.poll(t, opts);
  }

  /**
   * Sends the saved body, retrying transient failures under the same ID. When every attempt failed
   * transiently it resolves to undefined and leaves t.state unknown: {@link Client.poll} then
   * confirms whether the submission arrived. A tracked submission that was accepted is never sent
   * again: it answers what the client last knew of it, with the same error as when it learnt it.
   */
  async submit(t: Tracked, opts: CallOptions = {}): Promise<JobStatus | undefined> {
    return (await this.submitOnce(t, opts)).status;
  }

  private async submitOnce(t: Tracked, opts: CallOptions): Promise<{ status?: JobStatus; action: Action; retryAfterMs: number }> {
    if (t.state === 'accepted') {
      if (t.last?.state === STATE_DELETED) {
        throw new JobDeletedError(t.last);
      }
      if (t.last?.state === STATE_REJECTED) {
        throw new InsufficientCreditsError(t.last);
      }
      if (!t.last || t.last.money_state === MONEY_UNKNOWN) {
        // Nothing known, or an answer that was not taken at its word: a look tells.
        return { status: t.last, action: 'keep_polling', retryAfterMs: 0 };
      }
      return { status: t.last, action: onSubmitted(200, t.last).action, retryAfterMs: 0 };
    }
    checkSubmission('the submission', t.request);
    let last: Sent = { transient: true, retryAfterMs: 0 };
    for (let i = 0; i < this.submitAttempts; i++) {
      last = await this.post(t, opts);
      if (!last.transient) {
        return { status: last.status, action: last.action ?? 'keep_polling', retryAfterMs: 0 };
      }
      if (i < this.submitAttempts - 1) {
        await this.clock.sleep(this.backoff.delay(i, last.retryAfterMs), opts.signal);
      }
    }
    return { action: 'keep_polling', retryAfterMs: last.retryAfterMs };
  }

  /**
   * Sends the submission once. An answer that settles its fate — accepted, or refused for good —
   * sets t.state; a transient one leaves it unknown.
   */
  private async post(t: Tracked, opts: CallOptions): Promise<Sent> {
    let a: Answer;
    try {
      a = await this.send('POST', '/v1/jobs', undefined, JSON.stringify(t.request), opts);
    } catch (err) {
      if (opts.signal?.aborted) {
        throw opts.signal.reason;
      }
      return { transient: true, retryAfterMs: 0 };
    }
    if (a.code === 200 || a.code === 201 || a.code === 202) {
      const status = parseJSON(a.body)?.status as JobStatus | undefined;
      if (!status || typeof status.state !== 'string' || status.state === '') {
        // Not the API's answer, or cut short: the job may have been accepted. The same ID again,
        // or a look, tells.
        return { transient: true, retryAfterMs: 0 };
      }
      // The status code says where the money stands, as the job does; an answer whose two
      // disagree is taken at neither's word (onSubmitted).
      const { action, money_state } = onSubmitted(a.code, status);
      const answered = { ...status, money_state };
      t.state = 'accepted';
      t.last = answered;
      return { status: answered, action, transient: false, retryAfterMs: 0 };
    }
    if (a.code === 404) {
      // The submission route has no 404 of its own: a proxy's, or the API's no_route for a
      // misrouted request. Nothing is known of the job.
      return { transient: true, retryAfterMs: 0 };
    }
    if (isTransientStatus(a.code)) {
      return { transient: true, retryAfterMs: a.retryAfterMs };
    }
    const ae = apiError(a);
    if (a.code === 402 && ae.code === CODE_INSUFFICIENT_CREDITS) {
      // The API's own 402 says nothing was charged.
      const status = told(t, ae.state ?? STATE_REJECTED, or(ae.moneyState, MONEY_NOT_CHARGED), ae.apiMessage);
      status.reason = CODE_INSUFFICIENT_CREDITS;
      t.state = 'accepted';
      t.last = status;
      throw new InsufficientCreditsError(status);
    }
    if (a.code === 410) {
      // Accepted once, then deleted: the answer's money state, or unknown — never "not charged"
      // by default, since the job may have been charged before it was deleted.
      const status = told(t, ae.state ?? STATE_DELETED, ae.moneyState, ae.apiMessage);
      t.state = 'accepted';
      t.last = status;
      throw new JobDeletedError(status);
    }
    throw ae;
  }

  /**
   * Looks at the job and follows the decision table until it is settled, deleted, not received or
   * refused. Between two looks it waits pollIntervalMs while the job is being worked on, and a
   * backoff wait, never shorter than a Retry-After, after a look that failed transiently.
   */
  async poll(t: Tracked, opts: CallOptions = {}): Promise<JobStatus> {
    checkId('job_id', t.request?.job_id);
    let failures = 0;
    for (;;) {
      const { obs, status, error } = await this.look(t.request.job_id, t.request.account_id, opts);
      if (opts.signal?.aborted) {
        throw opts.signal.reason;
      }
      if (obs.status_code === 200 && status) {
        t.state = 'accepted';
        t.last = status;
      }
      let wait = this.pollIntervalMs;
      switch (decide(t, obs, this.clock.now())) {
        case 'done':
          if (status!.state === STATE_REJECTED) {
            throw new InsufficientCreditsError(status!);
          }
          return status!;
        case 'deleted': {
          const gone = obs.status_code === 404 || !status ? told(t, STATE_DELETED, MONEY_UNKNOWN, MSG_GONE_AFTER_ACCEPTED) : status;
          t.state = 'accepted';
          t.last = gone;
          throw new JobDeletedError(gone);
        }
        case 'not_received':
          throw new NotReceivedError();
        case 'fail':
          throw error;
        case 'resubmit': {
          t.resubmissions++;
          const sent = await this.post(t, opts);
          wait = Math.max(wait, this.backoff.honour(sent.retryAfterMs));
          break;
        }
        case 'keep_polling':
        case 'wait':
          break;
      }
      if (isTransient(obs)) {
        wait = this.backoff.delay(failures, error?.retryAfterMs ?? 0);
        failures++;
      } else {
        failures = 0;
      }
      await this.clock.sleep(wait, opts.signal);
    }
  }

  /**
   * Reads a job once, in account (the client's when empty). A network error or an unreadable 200
   * is an observation with an error; any other status comes with its APIError, whose money state
   * is unknown unless the answer told it, and a 410 with the job as the error tells it.
   */
  private async look(jobId: string, account: string | undefined, opts: CallOptions): Promise<{ obs: Observation; status?: JobStatus; error?: APIError }> {
    let a: Answer;
    try {
      a = await this.send('GET', `/v1/jobs/${encodeURIComponent(jobId)}`, this.jobQuery(account), undefined, opts);
    } catch (err) {
      return { obs: { error: err } };
    }
    if (a.code !== 200) {
      const error = apiError(a);
      const obs: Observation = { status_code: a.code };
      if (error.fromAPI) {
        obs.code = error.code;
      }
      const status =
        a.code === 410
          ? { job_id: jobId, account_id: account ?? '', state: error.state ?? STATE_DELETED, money_state: error.moneyState, message: error.apiMessage }
          : undefined;
      return { obs, status, error };
    }
    const status = parseJSON(a.body) as JobStatus | undefined;
    if (!status || typeof status !== 'object') {
      // An unreadable 200 is treated like a network error: look again.
      return { obs: { error: new Error('unreadable answer') } };
    }
    return { obs: { status_code: 200, state: status.state }, status };
  }

  /**
   * Reads a job once (GET /v1/jobs/{id}). An error answer is an {@link APIError}: the API's 404
   * not_received (never arrived, nothing charged), its 410 deleted (money state kept), or another
   * answer, whose money state is "unknown" unless the answer told it.
   */
  async status(jobId: string, opts: CallOptions = {}): Promise<JobStatus> {
    checkId('job_id', jobId);
    const { obs, status, error } = await this.look(jobId, this.accountId, opts);
    if (obs.error !== undefined) {
      throw obs.error;
    }
    if (obs.status_code !== 200) {
      throw error;
    }
    return status!;
  }

  /**
   * Deletes a settled job (DELETE /v1/jobs/{id}) and answers its tombstone: state deleted, with the
   * money state it had, which deletion itself never changes. Deletion hides the job's output, never
   * an obligation: a refunded job's late result still takes the refund back, and the tombstone then
   * reads money state charged with the figures. A job still submitting or running is an APIError
   * job_active, and nothing changes. A deleted ID can never be used again.
   */
  async deleteJob(jobId: string, opts: CallOptions = {}): Promise<JobStatus> {
    checkId('job_id', jobId);
    return this.call<JobStatus>('DELETE', `/v1/jobs/${encodeURIComponent(jobId)}`, this.jobQuery(undefined), undefined, [200], opts);
  }

  /**
   * Reports that a job's result landed (POST /v1/jobs/{id}/result), with the units its work used.
   * It takes a runner (or admin) key: the usage decides what a metered job costs. The same report
   * again is harmless (path already_applied); a different result of an attempt that already
   * reported one is a {@link ResultConflictError} (the first result stands, nothing was charged
   * again). A refusal is an APIError; nothing was written.
   */
  async reportResult(jobId: string, report: ResultReport, opts: CallOptions = {}): Promise<ResultAnswer> {
    checkId('job_id', jobId);
    const r = checkKeys('the result', report, ['attempt', 'output_ref', 'finished_at', 'units_used']);
    checkCount('attempt', r.attempt, 1);
    checkText('output_ref', r.output_ref, true);
    if (r.finished_at !== undefined && (typeof r.finished_at !== 'string' || Number.isNaN(Date.parse(r.finished_at)))) {
      throw new InvalidInputError(`finished_at ${JSON.stringify(r.finished_at)} must be an RFC 3339 time`);
    }
    if (r.units_used !== undefined) {
      checkCount('units_used', r.units_used, 0);
    }
    try {
      return await this.call<ResultAnswer>(
        'POST',
        `/v1/jobs/${encodeURIComponent(jobId)}/result`,
        this.jobQuery(undefined),
        JSON.stringify(report),
        [200, 202],
        opts,
      );
    } catch (err) {
      if (err instanceof APIError && err.fromAPI && err.statusCode === 409 && err.code === 'conflict') {
        throw new ResultConflictError(err.statusCode, err.code, err.apiMessage, err.moneyState, err.state, err.retryAfterMs, err.fromAPI);
      }
      throw err;
    }
  }

  /**
   * Reads one page of the jobs the key may see (GET /v1/jobs), newest first; pass the page's
   * next_cursor as cursor for the next. Options no server could answer are refused before sending.
   */
  async listJobs(list: ListOptions = {}, opts: CallOptions = {}): Promise<JobPage> {
    const q = this.jobQuery(undefined);
    if (list.state?.length) {
      for (const s of list.state) {
        if (s === '' || s.includes(',')) {
          throw new InvalidInputError(`state ${JSON.stringify(s)} must be one state name, without commas`);
        }
      }
      q.set('state', list.state.join(','));
    }
    if (list.dead_lettered !== undefined) {
      q.set('dead_lettered', String(list.dead_lettered));
    }
    if (list.created_after && list.created_before && !(list.created_after < list.created_before)) {
      throw new InvalidInputError('created_after must be before created_before');
    }
    if (list.created_after) {
      q.set('created_after', list.created_after.toISOString());
    }
    if (list.created_before) {
      q.set('created_before', list.created_before.toISOString());
    }
    if (list.limit !== undefined) {
      q.set('limit', String(checkCount('limit', list.limit, 1)));
    }
    if (list.cursor) {
      q.set('cursor', list.cursor);
    }
    return this.call<JobPage>('GET', '/v1/jobs', q, undefined, [200], opts);
  }

  /** Reads an account's balance (GET /v1/accounts/{id}). */
  async balance(accountId: string, opts: CallOptions = {}): Promise<Account> {
    checkId('account_id', accountId);
    return this.call<Account>('GET', `/v1/accounts/${encodeURIComponent(accountId)}`, undefined, undefined, [200], opts);
  }

  /** Reads one page of an account's ledger, oldest row first; pass next_after as after until it is 0. */
  async ledger(accountId: string, page: { after?: number; limit?: number } = {}, opts: CallOptions = {}): Promise<LedgerPage> {
    checkId('account_id', accountId);
    const q = new URLSearchParams();
    if (page.after) {
      q.set('after', String(checkCount('after', page.after, 0)));
    }
    if (page.limit !== undefined) {
      q.set('limit', String(checkCount('limit', page.limit, 1)));
    }
    return this.call<LedgerPage>('GET', `/v1/accounts/${encodeURIComponent(accountId)}/ledger`, q, undefined, [200], opts);
  }

  /** Reads an account's credit blocks (GET /v1/accounts/{id}/blocks), in the order a charge spends them. */
  async blocks(accountId: string, opts: CallOptions = {}): Promise<BlockList> {
    checkId('account_id', accountId);
    return this.call<BlockList>('GET', `/v1/accounts/${encodeURIComponent(accountId)}/blocks`, undefined, undefined, [200], opts);
  }

  /**
   * Reads an account's statement of the period [from, to) as JSON (GET /v1/accounts/{id}/statement):
   * the opening balance, the lines by kind and the closing balance. A period that holds no time is
   * refused before anything is sent.
   */
  async statement(accountId: string, from: Date, to: Date, opts: CallOptions = {}): Promise<Statement> {
    checkId('account_id', accountId);
    if (!(from < to)) {
      throw new InvalidInputError('the statement\'s from must be before its to');
    }
    const q = new URLSearchParams({ from: from.toISOString(), to: to.toISOString() });
    return this.call<Statement>('GET', `/v1/accounts/${encodeURIComponent(accountId)}/statement`, q, undefined, [200], opts);
  }

  /** Reads the price list (GET /v1/prices): each kind's current price. */
  async prices(opts: CallOptions = {}): Promise<Price[]> {
    return (await this.call<{ prices: Price[] }>('GET', '/v1/prices', undefined, undefined, [200], opts)).prices;
  }

  /** Reads every version of a kind's price, oldest first; a kind never priced is an APIError unknown_kind. */
  async priceHistory(kind: string, opts: CallOptions = {}): Promise<Price[]> {
    checkKind(kind);
    return (await this.call<{ versions: Price[] }>('GET', `/v1/prices/${encodeURIComponent(kind)}`, undefined, undefined, [200], opts)).versions;
  }

  /** The query of a job route: account_id, the given account or else the client's, when either is set. */
  private jobQuery(account: string | undefined): URLSearchParams {
    const q = new URLSearchParams();
    const a = account || this.accountId;
    if (a) {
      q.set('account_id', a);
    }
    return q;
  }

  /** Makes one request and decodes an answer of one of the ok statuses; any other is an APIError. */
  private async call<T>(method: string, path: string, query: URLSearchParams | undefined, body: string | undefined, ok: number[], opts: CallOptions): Promise<T> {
    const a = await this.send(method, path, query, body, opts);
    if (!ok.includes(a.code)) {
      throw apiError(a);
    }
    const out = parseJSON(a.body);
    if (out === undefined) {
      throw new Error(`jobbill API: unreadable answer to ${method} ${path}`);
    }
    return out as T;
  }

  /** Sends one request and reads its answer; a transport failure rejects. */
  private async send(method: string, path: string, query: URLSearchParams | undefined, body: string | undefined, opts: CallOptions): Promise<Answer> {
    const qs = query && [...query.keys()].length > 0 ? `?${query.toString()}` : '';
    const timeout = AbortSignal.timeout(this.requestTimeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    const headers: Record<string, string> = { Authorization: `Bearer ${this.key}`, Accept: 'application/json' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
    }
    const resp = await this.fetchImpl(this.baseUrl + path + qs, { method, headers, body, signal });
    const text = await resp.text();
    const retryAfterMs = resp.status === 429 || resp.status === 503 ? parseRetryAfter(resp.headers.get('Retry-After'), this.clock.now()) : 0;
    return { code: resp.status, body: text, retryAfterMs };
  }
}

/** The tracked job as an answer without a status body told it. */
function told(t: Tracked, state: string, money: string, message: string): JobStatus {
  return { job_id: t.request.job_id, account_id: t.request.account_id, kind: t.request.kind, state, money_state: money, message };
}

function or(s: string | undefined, fallback: string): string {
  return s && s !== MONEY_UNKNOWN ? s : fallback;
}

function parseJSON(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Reads an error answer. A body that is not the API's error shape (not JSON, or JSON without a
 * code) did not come from the API's handlers: its code is http_<status>, its money state unknown.
 */
function apiError(a: Answer): APIError {
  const body = parseJSON(a.body);
  if (!body || typeof body !== 'object' || typeof body.code !== 'string' || body.code === '') {
    return new APIError(a.code, `http_${a.code}`, `HTTP ${a.code}`, MONEY_UNKNOWN, undefined, a.retryAfterMs, false);
  }
  const money = typeof body.money_state === 'string' && body.money_state !== '' ? body.money_state : MONEY_UNKNOWN;
  const state = typeof body.state === 'string' && body.state !== '' ? body.state : undefined;
  return new APIError(a.code, body.code, String(body.message ?? ''), money, state, a.retryAfterMs, true);
}
