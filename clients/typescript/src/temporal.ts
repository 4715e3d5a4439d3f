// Helpers for backend services that reach jobbill's Temporal directly — trusted product code
// (docs/design.md, "Trust") — over the official @temporalio/client. They speak the workflow's
// JSON contract (contract/*.schema.json): namespace jobbill, task queue jobbill-metered-jobs,
// workflow MeteredJob under the ID job/<account>/<job>, payloads in snake_case.

import {
  Client,
  Connection,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowHandle,
  WorkflowNotFoundError,
} from '@temporalio/client';
import { InvalidInputError, WorkflowIdTakenError } from './errors';
import { checkCount, checkId, checkKeys, checkSubmission, checkText, SUBMISSION_FIELDS } from './validate';

/** jobbill's own Temporal namespace. */
export const NAMESPACE = 'jobbill';
/** The task queue the metered job workflow runs on. */
export const TASK_QUEUE = 'jobbill-metered-jobs';
/** The metered job workflow's type. */
export const WORKFLOW_TYPE = 'MeteredJob';
/** The signal that carries a {@link ResultSignal}: the job's result landed, possibly late. */
export const SIGNAL_RESULT = 'result';
/** The signal that carries a {@link RedriveRequest}: run a dead-lettered job's work again. */
export const SIGNAL_REDRIVE = 'redrive';
/** The query that answers a {@link WorkflowJobStatus}. */
export const QUERY_STATUS = 'status';
/** The update that waits until the job's charge is decided and answers a {@link ChargeDecision}. */
export const UPDATE_CHARGE_DECISION = 'charge-decision';
/** The contract version these helpers speak; a payload may leave it out (absent = 1). */
export const CONTRACT_VERSION = 1;

/**
 * How a job's work is retried and how long a late result is awaited. Every field is optional
 * (left out = the worker's default); durations are Go durations ("30s", "5m", "24h").
 */
export interface Policy {
  initial_interval?: string;
  backoff_coefficient?: number;
  maximum_interval?: string;
  maximum_attempts?: number;
  start_to_close?: string;
  heartbeat_timeout?: string;
  late_result_window?: string;
}

/** The workflow's input. It carries no amount: the ledger prices the kind (the price-list rule). */
export interface JobInput {
  contract_version?: number;
  /** The client's job ID ({@link newJobId}); no "/". */
  job_id: string;
  /** The paying account; no "/". */
  account_id: string;
  /** A kind of the price list. */
  kind: string;
  /** For a metered kind, a smaller maximum of units than the kind's; 0 or absent for the kind's own. */
  max_units?: number;
  /** Where the work reads its input. */
  input_ref?: string;
  policy?: Policy;
}

/** The `result` signal: an attempt's result landed, with the units its work used. */
export interface ResultSignal {
  contract_version?: number;
  /** The attempt that produced the result, from 1. */
  attempt: number;
  /** Where the result is. */
  output_ref: string;
  /** When the work finished, by the runner's clock (RFC 3339). */
  finished_at?: string;
  /** Units the work used, from 0; left out, the whole hold is billed. */
  units_used?: number;
}

/** The `redrive` signal: an operator runs a dead-lettered job's work again. */
export interface RedriveRequest {
  contract_version?: number;
  by: string;
  note: string;
}

/** The `charge-decision` update's answer: where the job and its money stand once decided. */
export interface ChargeDecision {
  /** running (charged), rejected (never charged), or a later state. */
  state: string;
  /** charged, not_charged or refunded. */
  money_state: string;
  /** Why the charge was refused; empty when it was not. */
  reason: string;
}

/** The `status` query's answer. */
export interface WorkflowJobStatus {
  job_id: string;
  account_id: string;
  cost: number;
  kind: string;
  units_used?: number;
  charged?: number;
  released?: number;
  state: string;
  money_state: string;
  attempts: number;
  dead_lettered: boolean;
  reason: string;
  output_ref: string;
  redrives: number;
  ignored_results: number;
  ignored_signals?: number;
  last_ignored?: string;
  alarm?: string;
}

/** Where to reach jobbill's Temporal. */
export interface ConnectOptions {
  /** host:port of the Temporal frontend; 127.0.0.1:7233 when left out. */
  address?: string;
  /** The namespace; jobbill's own ({@link NAMESPACE}) when left out. */
  namespace?: string;
}

/** Connects to jobbill's Temporal and answers a client of its namespace. Close its connection when done. */
export async function connect(opts: ConnectOptions = {}): Promise<Client> {
  const connection = await Connection.connect({ address: opts.address ?? '127.0.0.1:7233' });
  return new Client({ connection, namespace: opts.namespace ?? NAMESPACE });
}

/** The workflow ID of a job: job/<account>/<job>. Both IDs are checked: neither may hold a "/". */
export function jobWorkflowId(accountId: string, jobId: string): string {
  return `job/${checkId('account_id', accountId)}/${checkId('job_id', jobId)}`;
}

/** Options of {@link submitJob}. */
export interface SubmitOptions {
  /** The task queue the workers poll; {@link TASK_QUEUE} when left out. */
  taskQueue?: string;
}

/** The fields of {@link Policy}, as contract/job-input.schema.json lists them. */
export const POLICY_FIELDS = [
  'initial_interval',
  'backoff_coefficient',
  'maximum_interval',
  'maximum_attempts',
  'start_to_close',
  'heartbeat_timeout',
  'late_result_window',
] as const;
/** The fields of {@link JobInput} (the contract's, but `heal`, which only jobbill's reconcile pass writes). */
export const JOB_INPUT_FIELDS = ['contract_version', ...SUBMISSION_FIELDS, 'policy'] as const;
/** The fields of {@link ResultSignal}. */
export const RESULT_SIGNAL_FIELDS = ['contract_version', 'attempt', 'output_ref', 'finished_at', 'units_used'] as const;
/** A Go duration, as the contract's schema writes it. */
const DURATION = /^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$/;

/** Refuses a policy the workflow would refuse: unknown fields, durations not in Go's form. */
function checkPolicy(policy: unknown): void {
  const p = checkKeys('policy', policy, POLICY_FIELDS);
  for (const field of ['initial_interval', 'maximum_interval', 'start_to_close', 'heartbeat_timeout', 'late_result_window']) {
    const v = p[field];
    if (v !== undefined && (typeof v !== 'string' || !DURATION.test(v))) {
      throw new InvalidInputError(`policy.${field} ${JSON.stringify(v)} must be a Go duration such as "30s", "5m" or "24h"`);
    }
  }
  const c = p.backoff_coefficient;
  if (c !== undefined && (typeof c !== 'number' || !(c >= 0 && c <= 100))) {
    throw new InvalidInputError(`policy.backoff_coefficient ${JSON.stringify(c)} must be a number from 0 to 100 (0: the default)`);
  }
  if (p.maximum_attempts !== undefined && checkCount('policy.maximum_attempts', p.maximum_attempts, 0) > 1000) {
    throw new InvalidInputError(`policy.maximum_attempts ${p.maximum_attempts} must be at most 1000 (0: the default)`);
  }
}

/** Refuses a contract_version above the one these helpers speak. */
function checkVersion(v: unknown): void {
  if (v !== undefined && v !== CONTRACT_VERSION) {
    throw new InvalidInputError(`contract_version ${JSON.stringify(v)} is not ${CONTRACT_VERSION}, the version these helpers speak`);
  }
}

/**
 * What a submission does when its start is refused because a workflow already holds the job's
 * workflow ID: `join` (the job's own workflow runs: send the charge-decision update to it),
 * `answer_from_record` (it has closed: answer the job as it stands, never start it again) or
 * `workflow_id_taken` (another program's workflow, running or closed: the job can never start).
 */
export type HeldIdAction = 'join' | 'answer_from_record' | 'workflow_id_taken';

/**
 * The rule for a job's workflow ID held by a workflow of workflowType, running or not: the job
 * service's own (jobs/service.go), tested row for row against the same table
 * (apiclient/testdata/submission-decisions.json, workflow_id_held).
 */
export function onWorkflowIdHeld(workflowType: string, running: boolean): HeldIdAction {
  if (workflowType !== WORKFLOW_TYPE) {
    return 'workflow_id_taken';
  }
  return running ? 'join' : 'answer_from_record';
}

/**
 * Submits a job as jobbill's job service does: starts its MeteredJob workflow under
 * job/<account>/<job> with Update-With-Start and waits for the charge-decision update's answer:
 * running (charged) or rejected (not charged, with the reason). The start takes conflict policy
 * FAIL and reuse policy REJECT_DUPLICATE, so it never joins blindly and a closed job's ID never
 * starts again; when a workflow already holds the ID, {@link onWorkflowIdHeld} decides: the job's
 * own running workflow gets the same update (its ID is the job service's, so a retried submission
 * is the same update, answered once); a closed one — found closed, or closed by the time its
 * decision is answered — answers from its `status` query, the job as it stands (a run that closed
 * before its charge was decided answers `submitting`, not charged: jobbill's reconcile pass settles
 * it); another program's workflow throws {@link WorkflowIdTakenError}, nothing started or charged. An ID is charged once whatever is sent twice. An input that carries an amount, an
 * unknown field or an invalid ID or kind throws {@link InvalidInputError} and nothing is sent.
 */
export async function submitJob(client: Client, input: JobInput, opts: SubmitOptions = {}): Promise<ChargeDecision> {
  checkSubmission('the job input', input, ['contract_version', 'policy'], 0);
  checkVersion(input.contract_version);
  if (input.policy !== undefined) {
    checkPolicy(input.policy);
  }
  const workflowId = jobWorkflowId(input.account_id, input.job_id);
  const updateId = `${UPDATE_CHARGE_DECISION}:${input.job_id}`;
  const startWorkflowOperation = new WithStartWorkflowOperation(WORKFLOW_TYPE, {
    workflowId,
    taskQueue: opts.taskQueue ?? TASK_QUEUE,
    args: [{ contract_version: CONTRACT_VERSION, ...input }],
    workflowIdConflictPolicy: 'FAIL',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
  });
  const handle = client.workflow.getHandle(workflowId);
  let decision: ChargeDecision;
  try {
    decision = await client.workflow.executeUpdateWithStart<any, ChargeDecision, []>(UPDATE_CHARGE_DECISION, {
      startWorkflowOperation,
      updateId,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
      throw err;
    }
    return answerHeld(handle, workflowId, updateId);
  }
  // Temporal answers a retried submission's update from the execution that took it, without
  // starting anything, also once that execution has closed — its decision then long out of date (a
  // refunded job still "charged"). So, as the job service reads the ledger after the decision, a
  // run that is no longer running answers from its status.
  if ((await handle.describe()).status.name === 'RUNNING') {
    return decision;
  }
  return statusDecision(handle);
}

/** Answers a submission whose start was refused because a workflow holds the job's workflow ID. */
async function answerHeld(handle: WorkflowHandle, workflowId: string, updateId: string): Promise<ChargeDecision> {
  const held = await handle.describe();
  switch (onWorkflowIdHeld(held.type, held.status.name === 'RUNNING')) {
    case 'workflow_id_taken':
      throw new WorkflowIdTakenError(workflowId, held.type);
    case 'join':
      try {
        return await handle.executeUpdate<ChargeDecision, []>(UPDATE_CHARGE_DECISION, { updateId });
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) {
          throw err;
        }
        // It closed between the two calls: its status is the answer.
      }
  }
  return statusDecision(handle);
}

/** The job's charge as its workflow's status query tells it now: a closed run's answer. */
async function statusDecision(handle: WorkflowHandle): Promise<ChargeDecision> {
  const st = await handle.query<WorkflowJobStatus>(QUERY_STATUS);
  return { state: st.state, money_state: st.money_state, reason: st.state === 'rejected' ? st.reason : '' };
}

/** Reads a job's status from its workflow (query `status`); it answers closed workflows too. */
export async function jobStatus(client: Client, accountId: string, jobId: string): Promise<WorkflowJobStatus> {
  const handle = client.workflow.getHandle(jobWorkflowId(accountId, jobId));
  return handle.query<WorkflowJobStatus>(QUERY_STATUS);
}

/**
 * Signals a job's result (signal `result`): the attempt, where the output is, when the work
 * finished and the units it used. A result after the job was refunded recovers it (the refund is
 * reclaimed and the job settled at its usage). finished_at may be given as a Date, or left out.
 * A result that is not the contract's throws {@link InvalidInputError} and nothing is sent (the
 * workflow would ignore it, and count it). Once the job's workflow has closed (its late-result
 * window over, or settled) the signal rejects with WorkflowNotFoundError: report the result
 * through the API then (POST /v1/jobs/{id}/result with a runner key, the HTTP client's
 * reportResult), which settles it through jobbill's fallback workflow.
 */
export async function signalResult(
  client: Client,
  accountId: string,
  jobId: string,
  result: Omit<ResultSignal, 'finished_at'> & { finished_at?: string | Date },
): Promise<void> {
  const r = checkKeys('the result', result, RESULT_SIGNAL_FIELDS);
  checkVersion(r.contract_version);
  checkCount('attempt', r.attempt, 1);
  checkText('output_ref', r.output_ref, true);
  const finished = r.finished_at instanceof Date ? r.finished_at : typeof r.finished_at === 'string' ? new Date(r.finished_at) : undefined;
  if (r.finished_at !== undefined && (!finished || Number.isNaN(finished.getTime()))) {
    throw new InvalidInputError(`finished_at ${JSON.stringify(r.finished_at)} must be a Date or an RFC 3339 time`);
  }
  if (r.units_used !== undefined) {
    checkCount('units_used', r.units_used, 0);
  }
  const signal: ResultSignal = {
    contract_version: CONTRACT_VERSION,
    attempt: result.attempt,
    output_ref: result.output_ref,
  };
  if (finished) {
    signal.finished_at = finished.toISOString();
  }
  if (result.units_used !== undefined) {
    signal.units_used = result.units_used;
  }
  await client.workflow.getHandle(jobWorkflowId(accountId, jobId)).signal(SIGNAL_RESULT, signal);
}
