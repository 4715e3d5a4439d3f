// The Temporal helpers' payloads against the workflow's published JSON contract
// (contract/*.schema.json), so that a field the contract gains or loses fails here first.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { temporal } from '../src';
import { repoRoot } from './support';

function schema(name: string): any {
  return JSON.parse(readFileSync(path.join(repoRoot(), 'contract', name), 'utf8'));
}

describe('the Temporal helpers speak the published contract', () => {
  // The price-list rule and the doors: the helpers check a payload's fields against exactly the
  // contract's, so that what they let through the workflow reads, and nothing else (an input
  // the workflow would refuse is refused before it is sent).
  it('the input, policy and result fields are the schemas\'', () => {
    const input = schema('job-input.schema.json');
    assert.deepEqual(
      [...temporal.JOB_INPUT_FIELDS].sort(),
      Object.keys(input.properties).filter((f) => f !== 'heal').sort(),
      'every input field but heal, which only jobbill\'s reconcile pass writes',
    );
    assert.deepEqual([...temporal.POLICY_FIELDS].sort(), Object.keys(input.$defs.policy.properties).sort());
    assert.deepEqual([...temporal.RESULT_SIGNAL_FIELDS].sort(), Object.keys(schema('result-signal.schema.json').properties).sort());
    assert.equal(input.properties.contract_version.const, temporal.CONTRACT_VERSION);
    assert.ok(!('cost' in input.properties), 'the contract carries no amount');
  });
});
