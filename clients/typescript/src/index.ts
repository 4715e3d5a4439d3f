// jobbill's TypeScript client: the HTTP API with the submission rules (Client), and helpers over
// @temporalio/client for trusted backend services (submitJob, jobStatus, signalResult).

export * from './types';
export * from './errors';
export * from './decide';
export * from './backoff';
export { newJobId } from './jobid';
export { ID_PATTERN, KIND_PATTERN, MAX_ID_LENGTH } from './validate';
export { Client, ClientOptions, CallOptions, Clock, realClock } from './client';
export * as temporal from './temporal';
