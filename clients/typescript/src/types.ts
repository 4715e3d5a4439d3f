// The bodies of jobbill's HTTP API (docs/api.md), field for field as they travel: snake_case,
// credits as integers. A submission names a kind, never an amount: prices are set by the server.

/** The body of a submission (POST /v1/jobs). It carries no amount: the server prices the kind. */
export interface JobRequest {
  /** The client-generated job ID ({@link newJobId}); the same ID is the same job, for ever. */
  job_id: string;
  /** The paying account. */
  account_id: string;
  /** What the job is ("render-4k"); the server's price list prices it. */
  kind: string;
  /**
   * For a kind metered by the GPU-second, the most units the job may use, at most the kind's own
   * maximum; left out, the charge holds the kind's maximum.
   */
  max_units?: number;
  /** Where the work reads its input. */
  input_ref?: string;
}

/** Where a job and its money stand, as the API answers it (GET /v1/jobs/{id}). */
export interface JobStatus {
  job_id: string;
  account_id: string;
  /** The kind, and the version of its price the job was submitted at. */
  kind?: string;
  price_version?: number;
  /** The price: "job" or "gpu_second", credits per unit, and the units the charge holds. */
  unit?: string;
  unit_price?: number;
  held_units?: number;
  /** Credits the charge holds: unit_price × held_units. */
  held?: number;
  /** The usage the job was settled at, capped at held_units; absent until settled. */
  units_used?: number;
  /** The output the job was settled with; absent until delivered or recovered. */
  output_ref?: string;
  /** What the job costs the account as it stands (0 when not charged or refunded). */
  charged?: number;
  /** The part of the hold the settlement gave back. */
  released?: number;
  /** submitting, rejected, running, delivered, refunded, recovered or deleted. */
  state: string;
  /**
   * pending (submitting: the charge is being decided, and may still be taken), not_charged (rejected:
   * never charged, and never will be), charged, refunded — or {@link MONEY_UNKNOWN} when no answer told.
   */
  money_state: string;
  attempts?: number;
  /** Why a job was refunded or rejected: a code of the fixed vocabulary (docs/api.md). */
  reason?: string;
  /** The sentence for the user: where their money stands. */
  message?: string;
  created_at?: string;
}

/**
 * The money state of an answer that does not say where the money stands: the client cannot
 * tell, so it says so rather than guess "not charged".
 */
export const MONEY_UNKNOWN = 'unknown';

/** The body of POST /v1/jobs/{id}/result: the result landed, with the units its work used. */
export interface ResultReport {
  /** The attempt that produced the result, from 1. */
  attempt: number;
  /** Where the result is. */
  output_ref: string;
  /** When the work finished (RFC 3339); the server's time of receipt when left out. */
  finished_at?: string;
  /** Units the work used, from 0; left out, the whole hold is billed. Capped at the hold. */
  units_used?: number;
}

/** What the API did with a reported result. */
export interface ResultAnswer {
  /** signal, fallback, recorded (applied once Temporal answers) or already_applied. */
  path: string;
  outcome?: string;
  status: JobStatus;
  message?: string;
}

/** One page of an account's jobs (GET /v1/jobs). */
export interface JobPage {
  jobs: JobStatus[];
  /** The cursor of the next page; absent or empty on the last one. */
  next_cursor?: string;
}

/** Filters and paging of {@link Client.listJobs}. */
export interface ListOptions {
  state?: string[];
  dead_lettered?: boolean;
  created_after?: Date;
  created_before?: Date;
  limit?: number;
  cursor?: string;
}

/** An account's balance, in credits: the sum of its ledger rows. */
export interface Account {
  account_id: string;
  balance: number;
}

/** One row of an account's ledger. */
export interface LedgerEntry {
  id: number;
  /** grant, charge, refund, reclaim, release, adjustment or expire. */
  kind: string;
  /** The signed change in credits. */
  amount: number;
  balance_after: number;
  job_id?: string;
  key?: string;
  memo?: string;
  created_at: string;
}

/** One page of an account's ledger, oldest row first; next_after is 0 on the last page. */
export interface LedgerPage {
  account_id: string;
  entries: LedgerEntry[];
  next_after: number;
}

/**
 * One credit block of an account. A charge draws on blocks promotional before paid, then lower
 * priority, then sooner expiry (none last), then older; spendable says whether it can pay now.
 */
export interface Block {
  id: number;
  /** paid or promotional. */
  category: string;
  priority: number;
  /** What its grant put in; 0 for the opening block. */
  amount: number;
  remaining: number;
  effective_at: string;
  /** Absent when it never expires. */
  expires_at?: string;
  /** What the customer paid per credit, a decimal string; absent when unknown. */
  cost_basis?: string;
  memo?: string;
  /** active, pending or void. */
  status: string;
  opening: boolean;
  expired_at?: string;
  spendable: boolean;
  created_at: string;
}

/** An account's credit blocks, in the order a charge spends them. */
export interface BlockList {
  account_id: string;
  blocks: Block[];
}

/** The rows of one kind in a statement's period: grants by category, charges by job kind. */
export interface StatementLine {
  kind: string;
  category?: string;
  job_kind?: string;
  rows: number;
  amount: number;
}

/** What an account's money did over a period: opening + the lines' amounts = closing. */
export interface Statement {
  account_id: string;
  from: string;
  to: string;
  /** final, or provisional while a row may still be dated inside the period. */
  status: string;
  opening: number;
  lines: StatementLine[];
  closing: number;
}

/** One version of a kind's price. A job holds unit_price × max_units unless it asks for less. */
export interface Price {
  kind: string;
  version: number;
  unit: string;
  unit_price: number;
  max_units: number;
  memo?: string;
  created_at?: string;
}
