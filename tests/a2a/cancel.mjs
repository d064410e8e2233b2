// CancelTask through the official A2A JavaScript SDK (@a2a-js/sdk, the
// client.mjs setup), run by tests/e2e/test_a2a_cancel.py against a real
// hub and daemon:
//
//   node cancel.mjs '{"base": URL, "agent": NAME, "token": T, "other": T2, "races": N}'
//
// One JSON line per step on stdout ({"step", "ok", ...}).  A line with
// "delivered": ID waits for a line on stdin (the test saw the bootstrap),
// one with "consume": ID too (the test had the agent take it); a line with
// "race": ID does not wait: the test takes the bootstrap while the client
// cancels, and the next line says who won.  The last line has "done".
// Exits 1 at the first failure.
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);
const SUBMITTED = 1, CANCELED = 5;      // TaskState
const ROLE_USER = 1;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function say(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

function check(cond, step, detail) {
  say({ step, ok: !!cond, detail });
  if (!cond)
    process.exit(1);
}

async function client(agent, token) {
  const handler = {
    headers: async () => (token ? { Authorization: `Bearer ${token}` } : {}),
    shouldRetryWithHeaders: async () => undefined,
  };
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, handler);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    clientConfig: { polling: true },
  }));
  return factory.createFromUrl(`${args.base}/a2a/${agent}/`);
}

function message(text) {
  return { message: { messageId: randomUUID(), role: ROLE_USER,
                      parts: [{ content: { $case: 'text', value: text } }] } };
}

// The error's name, or null when the call succeeded (its result in .value).
async function outcome(fn) {
  try {
    return { value: await fn(), error: null };
  } catch (e) {
    return { value: null, error: e.name, message: String(e.message).slice(0, 200) };
  }
}

// A task sent and delivered (the test says when its bootstrap is there).
async function delivered(c, text) {
  const task = await c.sendMessage(message(text));
  check(task.status?.state === SUBMITTED, `SendMessage "${text}": SUBMITTED`, { id: task.id });
  say({ step: 'delivered?', delivered: task.id });
  await lines.next();
  return task;
}

const bob = await client(args.agent, args.token);
const alice = await client(args.agent, args.other);

// before its agent took it: CANCELED
const t1 = await delivered(bob, 'take this back');
const c1 = await outcome(() => bob.cancelTask({ id: t1.id }));
check(!c1.error && c1.value.id === t1.id && c1.value.status?.state === CANCELED,
      'CancelTask before the consume: CANCELED', { state: c1.value?.status?.state, error: c1.error });
const g1 = await bob.getTask({ id: t1.id });
check(g1.status.state === CANCELED, 'GetTask after it: CANCELED', { state: g1.status.state });
say({ step: 'canceled', canceled: t1.id });
await lines.next();
const again = await outcome(() => bob.cancelTask({ id: t1.id }));
check(again.error === 'TaskNotCancelableError', 'CancelTask again: TaskNotCancelableError',
      { error: again.error, message: again.message });

// another agent's token: not its task
const t2 = await delivered(bob, 'only bob may take this back');
const other = await outcome(() => alice.cancelTask({ id: t2.id }));
check(other.error === 'TaskNotFoundError', 'CancelTask with another token: TaskNotFoundError',
      { error: other.error, message: other.message });

// after its agent took it: TaskNotCancelableError
say({ step: 'consume', consume: t2.id });
await lines.next();
const late = await outcome(() => bob.cancelTask({ id: t2.id }));
check(late.error === 'TaskNotCancelableError', 'CancelTask after the consume: TaskNotCancelableError',
      { error: late.error, message: late.message });

// the race: the agent takes it while the client cancels; one of them wins
for (let i = 0; i < (args.races ?? 0); i++) {
  const t = await delivered(bob, `race ${i}`);
  say({ step: 'race', race: t.id });
  const r = await outcome(() => bob.cancelTask({ id: t.id }));
  const won = !r.error && r.value?.status?.state === CANCELED;
  check(won || r.error === 'TaskNotCancelableError', `race ${i}: CANCELED or TaskNotCancelableError`,
        { error: r.error, state: r.value?.status?.state });
  say({ step: 'race result', id: t.id, result: won ? 'canceled' : 'not_cancelable' });
  await lines.next();
}
say({ step: 'end', ok: true, done: true });
process.exit(0);
