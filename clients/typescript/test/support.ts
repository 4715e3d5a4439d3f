// What the tests share: a clock that moves by what the client waits for, a local HTTP server
// whose answers a test scripts, the shared decision table, and the environment of the end-to-end
// tests that `go test ./clients/typescript` sets up (a real API, Temporal and worker).

import { existsSync, readFileSync } from 'node:fs';
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { Clock } from '../src';

/** A clock that moves forward by exactly what the client sleeps, and records every wait. */
export class FakeClock implements Clock {
  readonly waits: number[] = [];
  constructor(public nowMs = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.nowMs;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) {
      throw signal.reason;
    }
    this.waits.push(ms);
    this.nowMs += ms;
  }
}

/** A request the scripted server received, its body read. */
export interface Received {
  method: string;
  url: URL;
  body: string;
}

/** A local HTTP server answering with handler; close it with close(). */
export async function scriptedServer(
  handler: (req: Received, res: ServerResponse) => void,
): Promise<{ url: string; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const r = { method: req.method ?? '', url: new URL(req.url ?? '/', 'http://x'), body };
      received.push(r);
      handler(r, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers JSON with a status. */
export function reply(res: ServerResponse, status: number, body?: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' });
  res.end(body === undefined ? '' : JSON.stringify(body));
}

/** The repository's root: the nearest directory up from here that holds apiclient/testdata. */
export function repoRoot(): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'apiclient', 'testdata'))) {
      return dir;
    }
  }
  throw new Error(`no apiclient/testdata above ${__dirname}: run the tests from the repository`);
}

/** One row of the shared decision table (apiclient/testdata/submission-decisions.json). */
export interface DecisionRow {
  name: string;
  tracked: { state: 'unknown' | 'accepted'; resubmissions: number; with_body: boolean };
  since_created: string;
  observation?: { network_error?: string; status_code?: number; state?: string; code?: string };
  want: string;
}

/** One row of the shared table's rule for a submission answered 200, 201 or 202 with its job. */
export interface SubmittedRow {
  name: string;
  answer: { status_code: number; state: string; money_state: string };
  want: string;
  reports: string;
}

/** One row of the shared table's rule for a workflow that holds a job's workflow ID. */
export interface HeldRow {
  name: string;
  workflow_type: string;
  running: boolean;
  want: string;
}

/** The shared decision table, which the Go client's and the job service's tests read too. */
export function decisionTable(): {
  confirm_window: string;
  max_resubmissions: number;
  on_not_found: DecisionRow[];
  on_submitted: SubmittedRow[];
  decide: DecisionRow[];
  workflow_id_held: HeldRow[];
} {
  return JSON.parse(readFileSync(path.join(repoRoot(), 'apiclient', 'testdata', 'submission-decisions.json'), 'utf8'));
}

/** A Go duration ("1h5m", "4m59.999999999s") in milliseconds, fractions kept. */
export function goDurationMs(d: string): number {
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 };
  let total = 0;
  let rest = d;
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/.exec(rest);
    if (!m) {
      throw new Error(`not a Go duration: ${d}`);
    }
    total += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return total;
}

/** The end-to-end environment `go test ./clients/typescript` sets; undefined outside it. */
export interface E2E {
  apiUrl: string;
  kind: string;
  price: number;
  account: string;
  customerKey: string;
  temporalAccount: string;
  temporalKey: string;
  poorAccount: string;
  poorKey: string;
  /** An account granted 100 paid credits at 0.01 and then 20 promotional ones, and its key. */
  blocksAccount: string;
  blocksKey: string;
  runnerKey: string;
  temporalAddress: string;
  temporalNamespace: string;
  taskQueue: string;
  /** An API whose workflow service cannot be reached (Temporal down), over the same ledger. */
  downApiUrl: string;
  /** A running job of `account` whose result is reported to that API. */
  downJobId: string;
}

/**
 * The end-to-end environment, or undefined when the tests run alone (npm test): the end-to-end
 * tests then skip, saying how to run them. Under the Go test every variable must be set.
 */
export function e2e(): E2E | undefined {
  if (process.env.JOBBILL_TS_E2E !== '1') {
    return undefined;
  }
  const need = (name: string): string => {
    const v = process.env[name];
    if (!v) {
      throw new Error(`${name} is not set: the Go test (go test ./clients/typescript) sets it`);
    }
    return v;
  };
  return {
    apiUrl: need('JOBBILL_TS_API_URL'),
    kind: need('JOBBILL_TS_KIND'),
    price: Number(need('JOBBILL_TS_PRICE')),
    account: need('JOBBILL_TS_ACCOUNT'),
    customerKey: need('JOBBILL_TS_CUSTOMER_KEY'),
    temporalAccount: need('JOBBILL_TS_TEMPORAL_ACCOUNT'),
    temporalKey: need('JOBBILL_TS_TEMPORAL_KEY'),
    poorAccount: need('JOBBILL_TS_POOR_ACCOUNT'),
    poorKey: need('JOBBILL_TS_POOR_KEY'),
    blocksAccount: need('JOBBILL_TS_BLOCKS_ACCOUNT'),
    blocksKey: need('JOBBILL_TS_BLOCKS_KEY'),
    runnerKey: need('JOBBILL_TS_RUNNER_KEY'),
    temporalAddress: need('JOBBILL_TS_TEMPORAL_ADDRESS'),
    temporalNamespace: need('JOBBILL_TS_TEMPORAL_NAMESPACE'),
    taskQueue: need('JOBBILL_TS_TASK_QUEUE'),
    downApiUrl: need('JOBBILL_TS_DOWN_API_URL'),
    downJobId: need('JOBBILL_TS_DOWN_JOB_ID'),
  };
}

/** Why the end-to-end tests skip when run alone. */
export const SKIP_E2E = 'needs the real API and Temporal: run `go test ./clients/typescript` (or make test)';
