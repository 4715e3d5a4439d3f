// Starts one job through jobbill's HTTP API and follows it until it is settled, printing where the
// job and the user's money stand. In your own code import from '@jobbill/client' instead of '../src'.
//
//   JOBBILL_API_URL=http://127.0.0.1:8080 JOBBILL_KEY=$ACME node dist/examples/start-job.js $ACCOUNT render-4k sim:ok

import { Client, newJobId } from '../src';

async function main(): Promise<void> {
  const [account, kind, inputRef = 'sim:ok'] = process.argv.slice(2);
  if (!account || !kind || !process.env.JOBBILL_KEY) {
    console.error('usage: JOBBILL_KEY=<customer key> node dist/examples/start-job.js ACCOUNT KIND [INPUT_REF]');
    process.exit(2);
  }
  const jobbill = new Client({ baseUrl: process.env.JOBBILL_API_URL ?? 'http://127.0.0.1:8080', key: process.env.JOBBILL_KEY });
  const tracked = jobbill.track({ job_id: newJobId('render'), account_id: account, kind, input_ref: inputRef });
  // A real product saves `tracked` (plain JSON) with the job before the first send, to resume it.
  const status = await jobbill.run(tracked); // submit, then poll until settled
  console.log(`${status.job_id}: ${status.state}, ${status.money_state} — ${status.message}`);
}

main().catch((err) => {
  // Every error says where the money stands (not charged, deleted with its money state, unknown).
  console.error(err.message);
  process.exit(1);
});
