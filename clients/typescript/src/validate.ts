// The checks both doors (the HTTP API and Temporal) make before anything is sent: what the
// server would refuse is refused here, naming the field, and nothing is sent — so nothing is
// written and nothing is charged.

import { InvalidInputError } from './errors';

/**
 * The ledger's rule for a job or account ID (ledgerdb.ValidateID): at most 128 bytes of letters,
 * digits and . _ : -, starting with a letter or digit — so never a "/", which separates the
 * account from the job in a workflow ID.
 */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
export const MAX_ID_LENGTH = 128;

/** The ledger's rule for a kind (ledgerdb.ValidateKind): lower-case, starting with a letter. */
export const KIND_PATTERN = /^[a-z][a-z0-9._-]{0,63}$/;

/**
 * Names under which a body would carry an amount, in any letter case. Prices are set by the
 * server (the price-list rule): a body that names one is refused before it is sent.
 */
const AMOUNT_FIELDS = ['cost', 'amount', 'price', 'unit_price', 'credits'];

/** Refuses an ID the ledger would refuse. */
export function checkId(field: string, id: unknown): string {
  if (typeof id !== 'string' || id === '') {
    throw new InvalidInputError(`${field} must be a non-empty string`);
  }
  if (Buffer.byteLength(id) > MAX_ID_LENGTH || !ID_PATTERN.test(id)) {
    throw new InvalidInputError(
      `${field} ${JSON.stringify(id)} must be at most ${MAX_ID_LENGTH} bytes of letters, digits and . _ : -, starting with a letter or digit`,
    );
  }
  return id;
}

/** Refuses a kind the price list could not hold. */
export function checkKind(kind: unknown): string {
  if (typeof kind !== 'string' || !KIND_PATTERN.test(kind)) {
    throw new InvalidInputError(
      `kind ${JSON.stringify(kind)} must name a kind of the price list: lower-case letters, digits and . _ -, starting with a letter`,
    );
  }
  return kind;
}

/** Refuses a count that is not a whole number in [min, 2^53). */
export function checkCount(field: string, n: unknown, min: number): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min) {
    throw new InvalidInputError(`${field} ${JSON.stringify(n)} must be a whole number from ${min}`);
  }
  return n;
}

/** Refuses free text that is not a string without control characters. */
export function checkText(field: string, text: unknown, required: boolean): void {
  if (text === undefined && !required) {
    return;
  }
  if (typeof text !== 'string' || (required && text === '')) {
    throw new InvalidInputError(`${field} must be ${required ? 'a non-empty' : 'a'} string`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(text)) {
    throw new InvalidInputError(`${field} must not hold control characters`);
  }
}

/**
 * Refuses a body whose keys are not exactly the allowed ones: an amount under any spelling is
 * refused with the rule that prices are set by the server, any other unknown key by its name (a
 * misspelt "max_unit" would otherwise hold the kind's whole maximum without a word).
 */
export function checkKeys(what: string, body: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidInputError(`${what} must be an object`);
  }
  for (const key of Object.keys(body)) {
    if (AMOUNT_FIELDS.includes(key.toLowerCase())) {
      throw new InvalidInputError(
        `${what} carries an amount (${JSON.stringify(key)}): prices are set by the server; name the job's kind instead`,
      );
    }
    if (!allowed.includes(key)) {
      throw new InvalidInputError(`${what} has an unknown field ${JSON.stringify(key)}; its fields are ${allowed.join(', ')}`);
    }
  }
  return body as Record<string, unknown>;
}

/** The fields of a submission, to the HTTP API and to Temporal alike. */
export const SUBMISSION_FIELDS = ['job_id', 'account_id', 'kind', 'max_units', 'input_ref'] as const;

/**
 * Refuses a submission the server would refuse: keys other than its fields (an amount above all),
 * IDs and a kind the ledger could not hold, a max_units that is not a whole number from
 * minMaxUnits (the API takes 1 and up; the workflow reads 0 as the kind's own), an input_ref that
 * is not text. `extra` names the further fields a door accepts.
 */
export function checkSubmission(what: string, body: unknown, extra: readonly string[] = [], minMaxUnits = 1): void {
  const b = checkKeys(what, body, [...SUBMISSION_FIELDS, ...extra]);
  checkId('job_id', b.job_id);
  checkId('account_id', b.account_id);
  checkKind(b.kind);
  if (b.max_units !== undefined) {
    checkCount('max_units', b.max_units, minMaxUnits);
  }
  checkText('input_ref', b.input_ref, false);
}
