// Receives jobbill's webhooks and verifies their Standard Webhooks signature (headers
// webhook-id, webhook-timestamp and webhook-signature; a whsec_ secret) with the standardwebhooks
// package before believing a word of them. A delivery may come twice: webhook-id names it, so a
// receiver acts on each ID once.
//
//   JOBBILL_WEBHOOK_SECRET=whsec_... node dist/examples/webhook-receiver.js 3000

import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/**
 * A server that answers 204 to a delivery whose signature verifies (and hands its event to
 * onEvent, once per webhook-id) and 400 to anything else, which it ignores.
 */
export function webhookReceiver(secret: string, onEvent: (id: string, event: unknown) => void): Server {
  const wh = new Webhook(secret);
  const seen = new Set<string>(); // a real receiver keeps these in its database
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // Verify the raw bytes as they came: a body parsed and re-serialised would not match.
      const payload = Buffer.concat(chunks).toString('utf8');
      let event: unknown;
      try {
        event = wh.verify(payload, req.headers as Record<string, string>);
      } catch (err) {
        res.writeHead(400, { 'Content-Type': 'text/plain' }).end(err instanceof WebhookVerificationError ? err.message : 'bad request');
        return;
      }
      const id = String(req.headers['webhook-id']);
      if (!seen.has(id)) {
        seen.add(id);
        onEvent(id, event);
      }
      res.writeHead(204).end();
    });
  });
}

if (require.main === module) {
  const secret = process.env.JOBBILL_WEBHOOK_SECRET;
  if (!secret?.startsWith('whsec_')) {
    console.error('usage: JOBBILL_WEBHOOK_SECRET=whsec_... node dist/examples/webhook-receiver.js [PORT]');
    process.exit(2);
  }
  const port = Number(process.argv[2] ?? 3000);
  webhookReceiver(secret, (id, event) => console.log(id, JSON.stringify(event))).listen(port, '127.0.0.1', () =>
    console.log(`listening for jobbill webhooks on http://127.0.0.1:${port}/`),
  );
}
