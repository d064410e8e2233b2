// One SendMessage to handoff-hubd through the official A2A JavaScript SDK
// (@a2a-js/sdk/client: ClientFactory from the agent's card, JSON-RPC), then
// GetTask until the task leaves SUBMITTED/WORKING or 30 s pass.  Run by
// tests/e2e/test_a2a_hub_remote.py:
//
//   node send.mjs '{"base": URL, "agent": NAME, "token": T, "text": S, "data"?: V}'
//
// "data": a data part (application/json) after the text part.
//
// Prints one JSON line: {"card": {...}, "task": first answer, "last": the
// last GetTask}; exits 1 on an error (its message on stderr).
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';

const args = JSON.parse(process.argv[2]);
const SUBMITTED = 1, WORKING = 2;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${args.token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  clientConfig: { polling: true },
}));
try {
  const c = await factory.createFromUrl(`${args.base}/a2a/${args.agent}/`);
  const parts = [{ content: { $case: 'text', value: args.text } }];
  if (args.data !== undefined)
    parts.push({ content: { $case: 'data', value: args.data }, mediaType: 'application/json' });
  const task = await c.sendMessage({ message: { messageId: randomUUID(), role: 1, parts } });
  let last = task;
  const end = Date.now() + 30000 * Number(process.env.HD_SLOW || 1);
  while ((last.status?.state === SUBMITTED || last.status?.state === WORKING) && Date.now() < end) {
    await sleep(100);
    last = await c.getTask({ id: task.id });
  }
  const card = c.agentCard;
  process.stdout.write(JSON.stringify({ card: { name: card.name, description: card.description,
    skills: card.skills?.map((s) => s.id), url: card.supportedInterfaces?.[0]?.url },
    task, last }) + '\n');
  process.exit(0);
} catch (e) {
  process.stderr.write(`${e.name}: ${e.message}\n`);
  process.exit(1);
}
