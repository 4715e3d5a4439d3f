// The ends of a call that are not an answer. Every error says where the user's money stands.

import { JobStatus, MONEY_UNKNOWN } from './types';

/**
 * An error answer: the API's error shape ({code, message, money_state}), or, for an answer that
 * is not the API's (a proxy's page, an empty body), the code http_<status> with money state
 * "unknown" — such an answer says nothing about the job.
 */
export class APIError extends Error {
  override readonly name: string = 'APIError';
  constructor(
    /** The HTTP status. */
    readonly statusCode: number,
    /** The API's error code (invalid_input, conflict …), or http_<status>. */
    readonly code: string,
    /** The API's sentence. */
    readonly apiMessage: string,
    /** Where the money stands, as the answer told it; "unknown" when it did not. */
    readonly moneyState: string = MONEY_UNKNOWN,
    /** The job's state, when the answer carried it (a 409 job_active, a 410). */
    readonly state: string | undefined = undefined,
    /** The wait a 429 or 503 asked for with Retry-After, in milliseconds; 0 when none. */
    readonly retryAfterMs: number = 0,
    /** Whether the body was the API's own error shape, whose code can be believed. */
    readonly fromAPI: boolean = true,
  ) {
    super(`jobbill API: ${statusCode} ${code}: ${apiMessage}`);
  }
}

/**
 * The client refused a call's arguments before sending anything (an empty ID, a body that names
 * an amount …): nothing was sent, so nothing was written or charged.
 */
export class InvalidInputError extends Error {
  override readonly name = 'InvalidInputError';
  constructor(detail: string) {
    super(`jobbill client: invalid input, nothing was sent: ${detail}`);
  }
}

/**
 * The job was accepted once and later deleted. It is never resubmitted; `status` carries the
 * money state the API told, or "unknown" — never "not charged" by default.
 */
export class JobDeletedError extends Error {
  override readonly name = 'JobDeletedError';
  constructor(readonly status: JobStatus) {
    super("the job was deleted; deleting moved no money, and a refunded job's late result may still take its refund back: the answer's money state says where it stands. Submit a new job (a new charge) only if the user asks");
  }
}

/** The server never received the submission within the confirmation window: nothing was charged. */
export class NotReceivedError extends Error {
  override readonly name = 'NotReceivedError';
  /** Where the money stands: the server never had the job. */
  readonly moneyState = 'not_charged';
  constructor() {
    super('not received by the server, not charged; please retry');
  }
}

/**
 * The job was rejected before it was charged (insufficient credits, or another reject reason in
 * `status.reason`): nothing was charged, and the ID can never be charged — a new try needs a new ID.
 */
export class InsufficientCreditsError extends Error {
  override readonly name = 'InsufficientCreditsError';
  constructor(readonly status: JobStatus) {
    super('insufficient credits: the job was not started and nothing was charged');
  }
}

/**
 * The attempt already reported a different result (another output or usage): the API's 409
 * conflict to a result report. The first result stands and nothing was charged again; sending
 * this report again never changes that, and no new ID helps.
 */
export class ResultConflictError extends APIError {
  override readonly name = 'ResultConflictError';
}

/**
 * The job's workflow ID is held by another program's workflow (running or closed), so the job's
 * own workflow can never start under it: the job was not started, nothing was charged, and this
 * ID can never be charged — a new try needs a new ID. The helpers never send the job's charge
 * decision into a workflow that is not the job's.
 */
export class WorkflowIdTakenError extends Error {
  override readonly name = 'WorkflowIdTakenError';
  /** Where the money stands: the job was never started. */
  readonly moneyState = 'not_charged';
  constructor(
    /** The job's workflow ID. */
    readonly workflowId: string,
    /** The type of the workflow that holds it. */
    readonly workflowType: string,
  ) {
    super(
      `the job's workflow ID ${workflowId} is held by another program's workflow (${workflowType}): the job was not started and nothing was charged; this ID can never be charged, so submit the job again under a new ID`,
    );
  }
}
