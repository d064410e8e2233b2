// handoff-hubd's A2A server driven by the official A2A JavaScript SDK
// (@a2a-js/sdk: ClientFactory, JsonRpcTransportFactory,
// createAuthenticatingFetchWithRetry), as an agent of another framework
// would drive it.  Run by tests/e2e/test_a2a.py against a real hub and
// daemon:
//
//   node client.mjs '{"base": URL, "agent": NAME, "token": T, "other": T2}'
//
// One JSON line per step on stdout ({"step", "ok", ...}); a line with
// "consume": ID (and "agent") asks the test to have the agent take that
// handoff, one with "complete": ID to have the agent report its result
// ("text"), each waiting for a line on stdin; the last line has "done".
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
const SLOW = Number(process.env.HD_SLOW || 1);
const SUBMITTED = 1, WORKING = 2, COMPLETED = 3, REJECTED = 7;   // TaskState
const ROLE_USER = 1;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function say(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

function check(cond, step, detail) {
  say({ step, ok: !!cond, detail });
  if (!cond)
    process.exit(1);
}

// A client for the agent's card, with a token (none: no Authorization).
async function client(agent, token) {
  const handler = {
    headers: async () => (token ? { Authorization: `Bearer ${token}` } : {}),
    shouldRetryWithHeaders: async () => undefined,
  };
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, handler);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    // a handoff ends when its agent takes it, maybe hours later: ask for
    // the task as submitted (returnImmediately), then poll
    clientConfig: { polling: true },
  }));
  return factory.createFromUrl(`${args.base}/a2a/${agent}/`);
}

function message(text, data, messageId = randomUUID()) {
  const parts = [{ content: { $case: 'text', value: text } }];
  if (data !== undefined)
    parts.push({ content: { $case: 'data', value: data }, mediaType: 'application/json' });
  return { message: { messageId, role: ROLE_USER, parts } };
}

async function until(what, fn) {
  const end = Date.now() + 30000 * SLOW;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end)
      return v;
    await sleep(50);
  }
}

async function refused(step, fn, name) {
  try {
    const r = await fn();
    check(false, step, { unexpected: r });
  } catch (e) {
    check(!name || e.name === name, step, { error: e.name, message: String(e.message).slice(0, 200) });
  }
}

const bob = await client(args.agent, args.token);
const card = bob.agentCard;
check(card.name === args.agent && card.capabilities?.streaming === true &&
      card.capabilities?.pushNotifications === false &&
      card.supportedInterfaces[0].protocolVersion === '1.0',
      'the card through the SDK', { name: card.name, skills: card.skills?.map((s) => s.id) });

// a text part and a data part
const mid = randomUUID();
const task = await bob.sendMessage(message('please summarize the call', { call: 7, lang: 'en' }, mid));
check(task.id?.startsWith('a2a-') && task.status?.state === SUBMITTED && task.contextId,
      'SendMessage: a task, SUBMITTED', { id: task.id, state: task.status?.state });
const got = await bob.getTask({ id: task.id });
check(got.status.state === SUBMITTED && got.contextId === task.contextId, 'GetTask: SUBMITTED',
      { state: got.status.state });
say({ step: 'consume', consume: task.id });
await lines.next();
const done = await until('COMPLETED', async () =>
  (await bob.getTask({ id: task.id })).status.state === COMPLETED);
check(done, 'GetTask: COMPLETED once the agent took it');

// the same messageId: the same task
const again = await bob.sendMessage(message('please summarize the call', { call: 7, lang: 'en' }, mid));
check(again.id === task.id && again.status.state === COMPLETED, 'the same messageId: the same task',
      { id: again.id, state: again.status.state });

// an agent that is not here: REJECTED with the reason (the card of alice,
// pointed at /a2a/ghost, as a client that guessed the URL)
const ghostCard = structuredClone(card);
ghostCard.supportedInterfaces[0].url = ghostCard.supportedInterfaces[0].url.replace(/\/a2a\/[^/]+$/, '/a2a/ghost');
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({
    fetchImpl: createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({ Authorization: `Bearer ${args.token}` }),
      shouldRetryWithHeaders: async () => undefined,
    }),
  })],
  clientConfig: { polling: true },
}));
const ghost = await factory.createFromAgentCard(ghostCard);
const rej = await ghost.sendMessage(message('hello'));
const why = rej.status?.message?.parts?.[0]?.content?.value ?? '';
check(rej.status?.state === REJECTED && why.startsWith('unknown_agent'),
      'an agent not here: REJECTED with the reason', { state: rej.status?.state, why });

// ListTasks: bob's, newest first
const list = await bob.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 10, pageToken: '' });
check(list.tasks[0]?.id === task.id && list.totalSize >= 1, 'ListTasks: bob\'s tasks, newest first',
      { ids: list.tasks.map((t) => t.id), totalSize: list.totalSize });

// refused without a token, and with another agent's token
const anon = await client(args.agent, null);
await refused('no token: refused', () => anon.getTask({ id: task.id }));
await refused('no token: SendMessage refused', () => anon.sendMessage(message('x')));
const alice = await client(args.agent, args.other);
await refused('another agent\'s token: TaskNotFoundError', () => alice.getTask({ id: task.id }),
              'TaskNotFoundError');
await refused('CancelTask of a completed task: TaskNotCancelableError',
              () => bob.cancelTask({ id: task.id }), 'TaskNotCancelableError');
// an agent that reports its result (completes = yes): SUBMITTED, WORKING
// once it took it, COMPLETED with its result as the task's artifact
const erin = await client(args.worker, args.token);
const wt = await erin.sendMessage(message('please translate the call', { call: 8 }));
check(wt.status?.state === SUBMITTED, 'completes = yes: SendMessage: SUBMITTED', { id: wt.id });
say({ step: 'consume', consume: wt.id, agent: args.worker });
await lines.next();
const working = await until('WORKING', async () =>
  (await erin.getTask({ id: wt.id })).status.state === WORKING);
check(working, 'GetTask: WORKING once the agent took it, until its result');
say({ step: 'complete', complete: wt.id, agent: args.worker, text: 'la traduction est faite' });
await lines.next();
const fin = await erin.getTask({ id: wt.id });
const part = fin.artifacts?.[0]?.parts?.[0]?.content;
check(fin.status.state === COMPLETED && fin.artifacts.length === 1 &&
      fin.artifacts[0].artifactId === `${wt.id}-result` && part?.$case === 'text' &&
      part.value === 'la traduction est faite',
      'GetTask: COMPLETED with the agent\'s result as an artifact',
      { state: fin.status.state, artifacts: fin.artifacts });
say({ step: 'end', ok: true, done: true });
process.exit(0);
