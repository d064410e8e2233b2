// One blocking SendMessage to handoff-hubd through the official A2A
// JavaScript SDK (@a2a-js/sdk/client: ClientFactory from the agent's card,
// JSON-RPC, clientConfig.polling false, so the SDK asks for a blocking
// send: A2A 1.0 section 3.2.2, the answer waits for the task's end).  Run
// by tests/e2e/test_relay_results.py:
//
//   node blocking.mjs '{"base": URL, "agent": NAME, "token": T, "text": S}'
//
// Prints one JSON line: {"task": the answer}; exits 1 on an error (its
// message on stderr).
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';

const args = JSON.parse(process.argv[2]);
const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${args.token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  clientConfig: { polling: false },
}));
try {
  const c = await factory.createFromUrl(`${args.base}/a2a/${args.agent}/`);
  const parts = [{ content: { $case: 'text', value: args.text } }];
  const task = await c.sendMessage({ message: { messageId: randomUUID(), role: 1, parts } });
  process.stdout.write(JSON.stringify({ task }, (k, v) => (typeof v === 'bigint' ? String(v) : v)) + '\n');
} catch (e) {
  process.stderr.write(`${e.name}: ${e.message}\n`);
  process.exit(1);
}
