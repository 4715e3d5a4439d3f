// Spacing of the client's retries of transient failures (the Go client's Backoff, in milliseconds).

/**
 * Options of {@link Backoff}. Each wait is drawn uniformly from zero to a ceiling that starts at
 * initialMs and doubles with each retry up to maxMs (full jitter), so that many clients that failed
 * together do not come back together. A 429's or 503's Retry-After is a floor — the client never
 * asks again sooner than the server asked — up to maxRetryAfterMs, so that a wrong or hostile
 * header cannot park a job for days.
 */
export interface BackoffOptions {
  /** The first retry's ceiling; 500 ms when left out. */
  initialMs?: number;
  /** The highest ceiling; 30 s when left out. */
  maxMs?: number;
  /** The cap of a Retry-After's wait; 5 minutes when left out. */
  maxRetryAfterMs?: number;
  /** Draws a number uniformly from [0, 1); Math.random when left out. Tests make it known. */
  random?: () => number;
}

export const DEFAULT_BACKOFF_INITIAL_MS = 500;
export const DEFAULT_BACKOFF_MAX_MS = 30_000;
export const DEFAULT_BACKOFF_MAX_RETRY_AFTER_MS = 5 * 60_000;

/** Full-jitter backoff with Retry-After as a floor; see {@link BackoffOptions}. */
export class Backoff {
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly random: () => number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs && opts.initialMs > 0 ? opts.initialMs : DEFAULT_BACKOFF_INITIAL_MS;
    this.maxMs = opts.maxMs && opts.maxMs > 0 ? opts.maxMs : DEFAULT_BACKOFF_MAX_MS;
    this.maxRetryAfterMs = opts.maxRetryAfterMs && opts.maxRetryAfterMs > 0 ? opts.maxRetryAfterMs : DEFAULT_BACKOFF_MAX_RETRY_AFTER_MS;
    this.random = opts.random ?? Math.random;
  }

  /**
   * The wait before retry number `retry` (0 for the first) after a failure whose answer asked for
   * retryAfterMs (0 when it asked for nothing).
   */
  delay(retry: number, retryAfterMs = 0): number {
    let ceiling = Math.min(this.initialMs, this.maxMs);
    for (let i = 0; i < retry && ceiling < this.maxMs; i++) {
      ceiling = Math.min(2 * ceiling, this.maxMs);
    }
    const jittered = Math.floor(this.random() * (ceiling + 1));
    return Math.max(jittered, this.honour(retryAfterMs));
  }

  /** The part of a Retry-After the client waits: all of it, up to maxRetryAfterMs. */
  honour(retryAfterMs: number): number {
    return Math.min(Math.max(retryAfterMs, 0), this.maxRetryAfterMs);
  }
}

/**
 * Reads a Retry-After header: a number of seconds, or an HTTP date (a wait until then, by the
 * client's clock). Anything else, or a time already past, asks for no wait.
 */
export function parseRetryAfter(value: string | null, nowMs: number): number {
  const v = (value ?? '').trim();
  if (v === '') {
    return 0;
  }
  if (/^\d+$/.test(v)) {
    return Math.min(Number(v), 2 ** 32) * 1000;
  }
  const at = Date.parse(v);
  if (!Number.isNaN(at) && /GMT$/.test(v) && at > nowMs) {
    return at - nowMs;
  }
  return 0;
}
