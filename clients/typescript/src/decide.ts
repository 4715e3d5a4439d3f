// The submission rules (docs/design.md, "Submission"; the table in docs/api.md, "The Go client")
// as pure functions, so that every row is table-tested: the rows live in
// apiclient/testdata/submission-decisions.json, which the Go client's tests read too.

import { JobRequest, JobStatus, MONEY_UNKNOWN } from './types';

/**
 * How long, from a submission's creation, the API's not_received 404 is taken for "still on its
 * way" rather than "never arrived": five minutes.
 */
export const CONFIRM_WINDOW_MS = 5 * 60 * 1000;

/** How often a submission the server never received is sent again, same ID and saved body. */
export const MAX_RESUBMISSIONS = 3;

/**
 * What the client knows of a submission: "unknown" until the server has answered for the ID,
 * then "accepted" for ever — from then on the ID is never resubmitted.
 */
export type SubmissionState = 'unknown' | 'accepted';

/** What the client does after one look at a job. */
export type Action =
  /** The job exists and is not settled, or the look said nothing about it: look again, same ID. */
  | 'keep_polling'
  /** Settled: delivered, recovered, refunded or rejected. */
  | 'done'
  /** Accepted once and its record is gone: never resubmit. */
  | 'deleted'
  /** The ID never reached the server: send the saved body again under the same ID. */
  | 'resubmit'
  /** Not arrived yet and nothing (left) to resubmit: look again later. */
  | 'wait'
  /** The confirmation window has passed and the server never had the ID: not charged. */
  | 'not_received'
  /** An answer no retry can change (400, 401, 403, 409 …). */
  | 'fail';

/**
 * A submission as the client remembers it: what product code persists beside the job (its JSON
 * is the Go client's Tracked, field for field, so either client can resume it).
 */
export interface Tracked {
  /** The saved body; sent again, unchanged, under the same ID. */
  request: JobRequest;
  /** When the submission was first made, by the client's clock (RFC 3339). */
  created_at: string;
  state: SubmissionState;
  /** The resubmissions made after the API's not_received 404. */
  resubmissions: number;
  /** The last status read, if any. */
  last?: JobStatus;
}

/**
 * One look at a job: a transport error, or an HTTP status with, for 200, the job's state and, for
 * an error whose body is the API's error shape, its code.
 */
export interface Observation {
  /** A network error (or an unreadable answer); the other fields are then ignored. */
  error?: unknown;
  status_code?: number;
  /** The job's state in a 200 answer. */
  state?: string;
  /** The API's error code (not_received, deleted …); absent when the body is not the API's. */
  code?: string;
}

/** The API's error codes the rules read (api/errors.go). */
export const CODE_NOT_RECEIVED = 'not_received';
export const CODE_DELETED = 'deleted';
export const CODE_INSUFFICIENT_CREDITS = 'insufficient_credits';

/** Whether the saved body can be resubmitted. */
export function hasBody(t: Tracked): boolean {
  return Boolean(t.request?.job_id) && Boolean(t.request?.account_id);
}

/** Milliseconds since the epoch of a time given as a Date or as milliseconds. */
function millis(now: Date | number): number {
  return typeof now === 'number' ? now : now.getTime();
}

/**
 * The 404 table, for the API's not_received 404 (any other 404 says nothing about the job, see
 * {@link decide}): accepted once → deleted (a resubmission would be a second paid job); never
 * accepted and the confirmation window past creation → not received, not charged; never accepted,
 * a saved body and fewer than MAX_RESUBMISSIONS → resubmit under the same ID; otherwise wait.
 */
export function onNotFound(t: Tracked, now: Date | number): Action {
  if (t.state === 'accepted') {
    return 'deleted';
  }
  if (millis(now) - Date.parse(t.created_at) >= CONFIRM_WINDOW_MS) {
    return 'not_received';
  }
  if (hasBody(t) && t.resubmissions < MAX_RESUBMISSIONS) {
    return 'resubmit';
  }
  return 'wait';
}

/** Whether an HTTP status says "ask again later": 408, 429 and every 5xx. */
export function isTransientStatus(code: number): boolean {
  return code === 408 || code === 429 || (code >= 500 && code <= 599);
}

/**
 * Whether a look said nothing about the job: a network error, 408, 429, 5xx, or a 404 that is not
 * the API's not_received (a proxy's, a path the API does not serve, a body that is not the API's).
 * Taking a proxy's 404 for "never arrived" would resubmit, or tell the user "not charged", about
 * a job that may be running and charged.
 */
export function isTransient(obs: Observation): boolean {
  const code = obs.status_code ?? 0;
  return obs.error !== undefined || isTransientStatus(code) || (code === 404 && obs.code !== CODE_NOT_RECEIVED);
}

/** The whole polling rule: what to do after one look at a job. */
export function decide(t: Tracked, obs: Observation, now: Date | number): Action {
  if (isTransient(obs)) {
    return 'keep_polling';
  }
  switch (obs.status_code) {
    case 200:
      switch (obs.state) {
        case 'delivered':
        case 'recovered':
        case 'refunded':
        case 'rejected':
          return 'done';
        case 'deleted':
          return 'deleted';
      }
      // submitting, running, and any state this client does not know: the job exists, so keep
      // polling the same ID; slow is not failed.
      return 'keep_polling';
    case 410:
      return 'deleted';
    case 404: // the API's not_received: any other 404 is transient above
      return onNotFound(t, now);
  }
  return 'fail';
}

/** What the client does with a submission answered with its job, and the money state it reports. */
export interface Submitted {
  action: Action;
  money_state: string;
}

/**
 * The rule for a POST /v1/jobs answered 200, 201 or 202 with the job it carries (docs/api.md,
 * "Submission answers"). The API's status follows where the job's money stands — 201 only when it
 * is charged, 202 while it is pending, 200 when the answer charges nothing (the same request again,
 * or a job refunded before the answer) — so a 201 whose job is charged, a 202 whose job is pending
 * and any 200 stand: done once the job is settled (a 200 refunded, say), deleted for a tombstone,
 * keep polling otherwise, reporting the job's money state. A 201 whose job is not charged, or a 202
 * whose job is decided, says more than its body, which the API never answers (a proxy's rewrite, a
 * server of another version): neither is taken at its word — keep polling, so that a look by ID
 * tells, and report the money as unknown until it does.
 */
export function onSubmitted(statusCode: number, status: JobStatus): Submitted {
  if ((statusCode === 201 && status.money_state !== 'charged') || (statusCode === 202 && status.money_state !== 'pending')) {
    return { action: 'keep_polling', money_state: MONEY_UNKNOWN };
  }
  const accepted: Tracked = { request: { job_id: '', account_id: '', kind: '' }, created_at: new Date(0).toISOString(), state: 'accepted', resubmissions: 0 };
  return { action: decide(accepted, { status_code: 200, state: status.state }, 0), money_state: status.money_state };
}
