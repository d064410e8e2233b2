// handoff-hubd's multi-turn tasks, driven by the official A2A JavaScript
// SDK (@a2a-js/sdk, pinned): the agent asks for input, the client answers
// in the same task.  Run by tests/e2e/test_a2a_multiturn.py against a real
// hub and daemon:
//
//   node multiturn.mjs '{"base": URL, "worker": NAME, "token": T}'
//
// One JSON line per step on stdout ({"step", "ok", ...}); a line with
// "take": AGENT asks the test to have that agent consume its next handoff
// and report "text" (completed) or "ask" (input required); the test
// answers with one JSON line on stdin: {"id": the handoff's id,
// "taskId": the task its payload continues, if any}.  The last line has
// "done".  Exits 1 at the first failure.
//
// The specification quoted is A2A 1.0 (a2aproject/A2A, docs/specification.md).
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);
const SUBMITTED = 1, WORKING = 2, COMPLETED = 3, INPUT_REQUIRED = 6;   // TaskState
const ROLE_USER = 1, ROLE_AGENT = 2;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function say(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

const KEEP_GOING = process.env.HD_KEEP_GOING === '1';
let failed = false;

function check(cond, step, detail) {
  say({ step, ok: !!cond, detail });
  failed ||= !cond;
  if (!cond && !KEEP_GOING)
    process.exit(1);
}

// The test's part: say what, read its answer.
async function ask(o) {
  say(o);
  return JSON.parse((await lines.next()).value);
}

async function client(polling) {
  const handler = {
    headers: async () => ({ Authorization: `Bearer ${args.token}` }),
    shouldRetryWithHeaders: async () => undefined,
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: createAuthenticatingFetchWithRetry(fetch, handler) })],
    clientConfig: { polling },
  }));
  return factory.createFromUrl(`${args.base}/a2a/${args.worker}/`);
}

function message(text, more) {
  return { message: { messageId: randomUUID(), role: ROLE_USER,
                      parts: [{ content: { $case: 'text', value: text } }], ...more } };
}

const textOf = (m) => m?.parts?.[0]?.content?.value;
const brief = (m) => ({ role: m.role, text: textOf(m), taskId: m.taskId });

function event(ev) {
  const p = ev.payload, v = p?.value;
  return {
    kind: p?.$case,
    state: p?.$case === 'task' || p?.$case === 'statusUpdate' ? v.status?.state : undefined,
    gen: v?.metadata?.generation,
  };
}

async function refused(step, fn, test) {
  try {
    const r = await fn();
    check(false, step, { unexpected: r });
  } catch (e) {
    check(test(e), step, { error: e.name, message: String(e.message).slice(0, 200) });
  }
}

const blocking = await client(false);
const polling = await client(true);

// A2A 1.0 section 3.2.2: a blocking send "MUST wait until the task
// reaches a terminal state ... or an interrupted state (INPUT_REQUIRED,
// AUTH_REQUIRED)".  Section 4.1.3 (TaskState): INPUT_REQUIRED, "the agent
// requires additional input from the user to continue".
let first, firstMsg;
{
  firstMsg = message('book me a table');
  const pending = blocking.sendMessage(firstMsg);
  const took = await ask({ step: 'take', take: args.worker, ask: 'for how many people?' });
  first = await pending;
  check(first.status?.state === INPUT_REQUIRED && textOf(first.status?.message) ===
        'for how many people?' && first.status?.message?.role === ROLE_AGENT &&
        first.id === took.id && first.metadata?.generation === 3,
        '3.2.2: a blocking sendMessage answers at INPUT_REQUIRED, the agent\'s question its '
        + 'status message', { state: first.status?.state, message: first.status?.message,
                              generation: first.metadata?.generation });
}

// A2A 1.0 section 3.4.3 (multi-turn): a client continues a task by
// sending a message with its taskId (and contextId); section 3.2.4: the
// history holds the task's messages.
let done;
{
  const pending = blocking.sendMessage(message('four of us', { taskId: first.id,
                                                              contextId: first.contextId }));
  const took = await ask({ step: 'take', take: args.worker, text: 'a table for four at eight' });
  check(took.taskId === first.id && took.id !== first.id,
        'the answer is the next handoff of the same task, to the same agent, linked to the first '
        + '(its payload names the task)', took);
  done = await pending;
  const hist = (done.history ?? []).map(brief);
  check(done.id === first.id && done.contextId === first.contextId &&
        done.status?.state === COMPLETED &&
        textOf(done.artifacts?.[0]) === 'a table for four at eight' &&
        JSON.stringify(hist) === JSON.stringify([
          { role: ROLE_USER, text: 'book me a table', taskId: first.id },
          { role: ROLE_AGENT, text: 'for how many people?', taskId: first.id },
          { role: ROLE_USER, text: 'four of us', taskId: first.id },
        ]),
        '3.4.3: continued with taskId: the same task COMPLETED, with its history, both ways',
        { state: done.status?.state, history: hist, artifacts: done.artifacts?.length });
}

// A2A 1.0 section 3.2.4: "historyLength ... 0: no history; N > 0: at most
// N most recent messages"; unset: the server's default (here, all).
{
  const one = await blocking.getTask({ id: first.id, historyLength: 1 });
  const none = await blocking.getTask({ id: first.id, historyLength: 0 });
  const all = await blocking.getTask({ id: first.id });
  check(one.history?.length === 1 && textOf(one.history[0]) === 'four of us' &&
        !(none.history?.length) && all.history?.length === 3 &&
        all.metadata?.generation === 7,
        '3.2.4: GetTask historyLength 1 gives the last message, 0 none, unset all three; '
        + 'the generation counts both turns (7)',
        { one: one.history?.map(brief), none: none.history?.length, all: all.history?.length,
          generation: all.metadata?.generation });
}

// The first message again (a client's retry, the same messageId and
// parts) is the same task, as it is now: every turn of it.
{
  const t = await polling.sendMessage({ ...firstMsg, configuration: { returnImmediately: true } });
  check(t.id === first.id && t.status?.state === COMPLETED && t.metadata?.generation === 7,
        'the first message sent again: the same task, COMPLETED at 7, not its first turn',
        { id: t.id, state: t.status?.state, generation: t.metadata?.generation });
}

// A2A 1.0 section 3.4.2: "If taskId is provided but the task does not
// exist, the server MUST return a TaskNotFoundError"; a task in a
// terminal state cannot be continued: UnsupportedOperationError.
await refused('3.4.2: a message naming a task that does not exist: TaskNotFoundError',
              () => blocking.sendMessage(message('hello?', {
                taskId: 'a2a-0000000000000000000000000000000000000000' })),
              (e) => e.name === 'TaskNotFoundError');
await refused('3.4.2: a message naming a COMPLETED task: UnsupportedOperationError',
              () => blocking.sendMessage(message('and dessert', { taskId: first.id })),
              (e) => e.name === 'UnsupportedOperationError');

// Streams and generations go on through the turns: the first stream ends
// at INPUT_REQUIRED (3.1.2: "or an interrupted state"), the second begins
// with the Task as it is (4, SUBMITTED) and ends COMPLETED (7).
{
  const gotA = [];
  let id;
  for await (const ev of blocking.sendMessageStream(message('order flowers'))) {
    gotA.push(event(ev));
    if (gotA.length === 1) {
      id = ev.payload.value.id;
      await ask({ step: 'take', take: args.worker, ask: 'roses or tulips?' });
    }
  }
  check(JSON.stringify(gotA) === JSON.stringify([
    { kind: 'task', state: SUBMITTED, gen: 1 },
    { kind: 'statusUpdate', state: WORKING, gen: 2 },
    { kind: 'statusUpdate', state: INPUT_REQUIRED, gen: 3 },
  ]), '3.1.2: the first turn streamed: Task, WORKING, INPUT_REQUIRED (1 to 3), then closed', gotA);
  const ctx = (await blocking.getTask({ id })).contextId;
  // a task still at work takes no message (the agent has not asked)
  const gotB = [];
  for await (const ev of blocking.sendMessageStream(message('tulips', { taskId: id, contextId: ctx }))) {
    gotB.push(event(ev));
    if (gotB.length === 1) {
      await refused('a message to a task whose agent has not asked for input: '
                    + 'UnsupportedOperationError',
                    () => polling.sendMessage(message('and a card', { taskId: id })),
                    (e) => e.name === 'UnsupportedOperationError');
      await ask({ step: 'take', take: args.worker, text: 'tulips ordered' });
    }
  }
  check(JSON.stringify(gotB) === JSON.stringify([
    { kind: 'task', state: SUBMITTED, gen: 4 },
    { kind: 'statusUpdate', state: WORKING, gen: 5 },
    { kind: 'artifactUpdate', gen: 6 },
    { kind: 'statusUpdate', state: COMPLETED, gen: 7 },
  ]), 'the second turn streamed: the Task at 4, WORKING, the artifact, COMPLETED (4 to 7)', gotB);
}

// A contextId that is not the task's is refused (3.4.3: the task belongs
// to its context); a -32602 of JSON-RPC, which the SDK names
// RequestMalformedError.
{
  const t = await polling.sendMessage(message('a third task'));
  await ask({ step: 'take', take: args.worker, ask: 'which one?' });
  let st;
  for (let i = 0; i < 300 && st !== INPUT_REQUIRED; i++) {
    st = (await polling.getTask({ id: t.id })).status?.state;
    if (st !== INPUT_REQUIRED)
      await new Promise((r) => setTimeout(r, 100));
  }
  await refused('a message naming a task with another contextId: InvalidParams (-32602)',
                () => polling.sendMessage(message('that one', { taskId: t.id, contextId: 'ctx-other' })),
                (e) => e.name === 'RequestMalformedError' && /contextId/.test(e.message));
}
say({ step: 'end', ok: !failed, done: true });
process.exit(failed ? 1 : 0);
