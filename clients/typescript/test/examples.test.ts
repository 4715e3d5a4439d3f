// The examples the READMEs show, run: the webhook receiver verifies Standard Webhooks signatures.

import assert from 'node:assert/strict';
import { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { webhookReceiver } from '../examples/webhook-receiver';

const secret = 'whsec_' + Buffer.from('a test secret of 24 bytes').toString('base64');

describe('the webhook receiver example', () => {
  // Trust: a delivery is believed only when its signature verifies with the shared secret and
  // its timestamp is recent; a forged, tampered or unsigned one is refused (400) and ignored, and
  // a delivery that comes twice is acted on once.
  it('accepts a signed delivery once, refuses a forged or tampered one', async () => {
    const events: string[] = [];
    const server = webhookReceiver(secret, (id) => events.push(id));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const body = JSON.stringify({ type: 'job.settled', data: { job_id: 'render-1', state: 'delivered', money_state: 'charged' } });
      const now = new Date();
      const headers = (id: string, signature: string) => ({
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': signature,
        'content-type': 'application/json',
      });
      const signed = new Webhook(secret).sign('msg_1', now, body);
      const forged = new Webhook('whsec_' + Buffer.from('another secret entirely').toString('base64')).sign('msg_2', now, body);

      assert.equal((await fetch(url, { method: 'POST', headers: headers('msg_1', signed), body })).status, 204);
      assert.equal((await fetch(url, { method: 'POST', headers: headers('msg_1', signed), body })).status, 204, 'a redelivery is answered');
      assert.equal((await fetch(url, { method: 'POST', headers: headers('msg_2', forged), body })).status, 400);
      const tampered = body.replace('charged', 'refunded');
      assert.equal((await fetch(url, { method: 'POST', headers: headers('msg_1', signed), body: tampered })).status, 400);
      assert.equal((await fetch(url, { method: 'POST', body })).status, 400, 'no signature headers');
      assert.deepEqual(events, ['msg_1'], 'one event, acted on once');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
