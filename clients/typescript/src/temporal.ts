// Helpers for backend services that reach jobbill's Temporal directly — trusted product code
// (docs/design.md, "Trust") — over the official @temporalio/client. They speak the workflow's
// JSON contract (contract/*.schema.json): namespace jobbill, task queue jobbill-metered-jobs,
// workflow MeteredJob under the ID job/<account>/<job>, payloads in snake_case.

import {
  Client,
  Connection,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
} from '@temporalio/client';
import { InvalidInputError } from './errors';
import { checkCount, checkId, checkKeys, checkSubmission, checkText } from './validate';

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

/** The workflow's input. It carries no amount: the ledger prices the kind (money rule 5). */
export interface JobInput {
  contract_version?: number;
  /** The client's job ID ({@link newJobId}); no "/". */
  job_id: string;
  /** The paying account; no "/". */
  account_id: string;
  /** A kind of the price list. */
  kind: string;
  /** For a metered kind, a smaller maximum of units than the kind's. */
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
  /** When the work finished (RFC 3339). */
  finished_at: string;
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
  /** A rejection's or refund's reason code. */
  reason?: string;
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

const POLICY_FIELDS = [
  'initial_interval',
  'backoff_coefficient',
  'maximum_interval',
  'maximum_attempts',
  'start_to_close',
  'heartbeat_timeout',
  'late_result_window',
] as const;
const DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;

/** Refuses a policy the workflow would refuse: unknown fields, durations not in Go's form. */
function checkPolicy(policy: unknown): void {
  const p = checkKeys('policy', policy, POLICY_FIELDS);
  for (const field of ['initial_interval', 'maximum_interval', 'start_to_close', 'heartbeat_timeout', 'late_result_window']) {
    const v = p[field];
    if (v !== undefined && (typeof v !== 'string' || !DURATION.test(v))) {
      throw new InvalidInputError(`policy.${field} ${JSON.stringify(v)} must be a Go duration such as "30s", "5m" or "24h"`);
    }
  }
  if (p.backoff_coefficient !== undefined && (typeof p.backoff_coefficient !== 'number' || !(p.backoff_coefficient >= 1))) {
    throw new InvalidInputError(`policy.backoff_coefficient ${JSON.stringify(p.backoff_coefficient)} must be a number from 1`);
  }
  if (p.maximum_attempts !== undefined) {
    checkCount('policy.maximum_attempts', p.maximum_attempts, 1);
  }
}

/** Refuses a contract_version above the one these helpers speak. */
function checkVersion(v: unknown): void {
  if (v !== undefined && v !== CONTRACT_VERSION) {
    throw new InvalidInputError(`contract_version ${JSON.stringify(v)} is not ${CONTRACT_VERSION}, the version these helpers speak`);
  }
}

/**
 * Submits a job: starts its MeteredJob workflow under job/<account>/<job> with Update-With-Start
 * (conflict policy USE_EXISTING, so a repeated submission joins the job's running workflow
 * instead of starting a second; reuse policy REJECT_DUPLICATE, so a closed job's ID never starts
 * again) and waits for the charge-decision update's answer: running (charged) or rejected (not
 * charged). A job whose workflow has closed answers its decision from its status query. The
 * update's ID is the one the job service uses, so a retried submission is the same update,
 * answered once. An input that carries an amount, an unknown field or an invalid ID or kind
 * throws {@link InvalidInputError} and nothing is sent.
 */
export async function submitJob(client: Client, input: JobInput, opts: SubmitOptions = {}): Promise<ChargeDecision> {
  checkSubmission('the job input', input, ['contract_version', 'policy']);
  checkVersion(input.contract_version);
  if (input.policy !== undefined) {
    checkPolicy(input.policy);
  }
  const workflowId = jobWorkflowId(input.account_id, input.job_id);
  const startWorkflowOperation = new WithStartWorkflowOperation(WORKFLOW_TYPE, {
    workflowId,
    taskQueue: opts.taskQueue ?? TASK_QUEUE,
    args: [{ contract_version: CONTRACT_VERSION, ...input }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
  });
  try {
    return await client.workflow.executeUpdateWithStart<any, ChargeDecision, []>(UPDATE_CHARGE_DECISION, {
      startWorkflowOperation,
      updateId: `${UPDATE_CHARGE_DECISION}:${input.job_id}`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
      throw err;
    }
    // The job's workflow has closed: its status says how its charge was decided.
    const status = await jobStatus(client, input.account_id, input.job_id);
    return { state: status.state, money_state: status.money_state, reason: status.reason || undefined };
  }
}

/** Reads a job's status from its workflow (query `status`); it answers closed workflows too. */
export async function jobStatus(client: Client, accountId: string, jobId: string): Promise<WorkflowJobStatus> {
  const handle = client.workflow.getHandle(jobWorkflowId(accountId, jobId));
  return handle.query<WorkflowJobStatus>(QUERY_STATUS);
}

/**
 * Signals a job's result (signal `result`): the attempt, where the output is, when the work
 * finished and the units it used. A result after the job was refunded recovers it (the refund is
 * reclaimed and the job settled at its usage). finished_at may be given as a Date. A result that
 * is not the contract's throws {@link InvalidInputError} and nothing is sent.
 */
export async function signalResult(
  client: Client,
  accountId: string,
  jobId: string,
  result: Omit<ResultSignal, 'finished_at'> & { finished_at: string | Date },
): Promise<void> {
  const r = checkKeys('the result', result, ['contract_version', 'attempt', 'output_ref', 'finished_at', 'units_used']);
  checkVersion(r.contract_version);
  checkCount('attempt', r.attempt, 1);
  checkText('output_ref', r.output_ref, true);
  const finished = r.finished_at instanceof Date ? r.finished_at : typeof r.finished_at === 'string' ? new Date(r.finished_at) : undefined;
  if (!finished || Number.isNaN(finished.getTime())) {
    throw new InvalidInputError(`finished_at ${JSON.stringify(r.finished_at)} must be a Date or an RFC 3339 time`);
  }
  if (r.units_used !== undefined) {
    checkCount('units_used', r.units_used, 0);
  }
  const signal: ResultSignal = {
    contract_version: CONTRACT_VERSION,
    attempt: result.attempt,
    output_ref: result.output_ref,
    finished_at: finished.toISOString(),
  };
  if (result.units_used !== undefined) {
    signal.units_used = result.units_used;
  }
  await client.workflow.getHandle(jobWorkflowId(accountId, jobId)).signal(SIGNAL_RESULT, signal);
}
