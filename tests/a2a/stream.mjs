// handoff-hubd's blocking SendMessage and its streams, driven by the
// official A2A JavaScript SDK (@a2a-js/sdk, pinned), as a framework's
// agent drives them.  Run by tests/e2e/test_a2a_stream.py against a real
// hub and daemon:
//
//   node stream.mjs '{"base": URL, "agent": NAME, "worker": NAME, "token": T}'
//
// One JSON line per step on stdout ({"step", "ok", ...}); a line with
// "take": AGENT asks the test to have that agent consume its next
// handoff (and report "text" as its result when "text" is set), one with
// "complete": ID to report the result of one consumed already, one with
// "kill": true to SIGKILL the hub and start it again; each waits for a
// line on stdin.  The last line has "done".  Exits 1 at the first failure.
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
const SUBMITTED = 1, WORKING = 2, COMPLETED = 3;   // TaskState
const ROLE_USER = 1;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function say(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

// HD_KEEP_GOING=1: each failure said, the steps after it run (to show
// which of them a build fails), the exit 1 at the end.
const KEEP_GOING = process.env.HD_KEEP_GOING === '1';
let failed = false;

function check(cond, step, detail) {
  say({ step, ok: !!cond, detail });
  failed ||= !cond;
  if (!cond && !KEEP_GOING)
    process.exit(1);
}

// The test's part: say what, wait for its line.
async function ask(o) {
  say(o);
  await lines.next();
}

async function client(agent, polling) {
  const handler = {
    headers: async () => ({ Authorization: `Bearer ${args.token}` }),
    shouldRetryWithHeaders: async () => undefined,
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: createAuthenticatingFetchWithRetry(fetch, handler) })],
    clientConfig: { polling },
  }));
  return factory.createFromUrl(`${args.base}/a2a/${agent}/`);
}

function message(text) {
  return { message: { messageId: randomUUID(), role: ROLE_USER,
                      parts: [{ content: { $case: 'text', value: text } }] } };
}

// An event as the checks read it: its kind, state, generation.
function brief(ev) {
  const p = ev.payload;
  const v = p?.value;
  return {
    kind: p?.$case,
    state: p?.$case === 'task' || p?.$case === 'statusUpdate' ? v.status?.state : undefined,
    gen: p?.$case === 'task' ? v.metadata?.generation : v?.metadata?.generation,
    text: p?.$case === 'artifactUpdate' ? v.artifact?.parts?.[0]?.content?.value : undefined,
  };
}

async function collect(iter, each) {
  const got = [];
  for await (const ev of iter) {
    got.push(brief(ev));
    if (each)
      await each(got[got.length - 1], got.length);
  }
  return got;
}

async function refused(step, fn, name) {
  try {
    const r = await fn();
    if (r && r[Symbol.asyncIterator])
      for await (const ev of r)
        check(false, step, { unexpected: brief(ev) });
    check(false, step, { unexpected: r });
  } catch (e) {
    check(e.name === name, step, { error: e.name, message: String(e.message).slice(0, 200) });
  }
}

const blocking = await client(args.worker, false);
const polling = await client(args.worker, true);
check(blocking.agentCard.capabilities?.streaming === true &&
      blocking.agentCard.capabilities?.extensions?.some((e) => e.uri === 'urn:handoffd:a2a:generation:1'),
      'the card: streaming, the generation extension',
      { capabilities: blocking.agentCard.capabilities });

// A2A 1.0 section 3.2.2: "Blocking (return_immediately: false or unset):
// The operation MUST wait until the task reaches a terminal state ... or an
// interrupted state ... before returning. The response MUST include the
// latest task state with all artifacts and status information. This is the
// default behavior."  The SDK's sendMessage is blocking by default.
{
  const pending = blocking.sendMessage(message('translate the call, blocking'));
  await ask({ step: 'take', take: args.worker, text: 'la traduction bloquante' });
  const t = await pending;
  check(t.status?.state === COMPLETED && t.artifacts?.[0]?.parts?.[0]?.content?.value ===
        'la traduction bloquante' && t.metadata?.generation === 4,
        '3.2.2: a default (blocking) sendMessage answers COMPLETED with the artifact',
        { state: t.status?.state, artifacts: t.artifacts?.length, generation: t.metadata?.generation });
}

// A2A 1.0 section 3.1.2: "If the agent returns a Task, the stream MUST
// begin with the Task object, followed by zero or more
// TaskStatusUpdateEvent or TaskArtifactUpdateEvent objects. The stream
// MUST close when the task reaches a terminal state"; section 9.4.2: "HTTP
// 200 with Content-Type: text/event-stream", each event "data: {jsonrpc,
// id, result: StreamResponse}".
{
  const got = await collect(blocking.sendMessageStream(message('translate, streamed')),
    async (ev, n) => {
      if (n === 1)
        await ask({ step: 'take', take: args.worker, text: 'le flux' });
    });
  check(JSON.stringify(got) === JSON.stringify([
    { kind: 'task', state: SUBMITTED, gen: 1 },
    { kind: 'statusUpdate', state: WORKING, gen: 2 },
    { kind: 'artifactUpdate', gen: 3, text: 'le flux' },
    { kind: 'statusUpdate', state: COMPLETED, gen: 4 },
  ]), '3.1.2: sendMessageStream: the Task, WORKING, the artifact, COMPLETED, numbered 1 to 4; '
      + 'then the stream closed', got);
}

// A2A 1.0 section 3.1.6: "The operation MUST return a Task object as the
// first event in the stream, representing the current state of the task
// at the time of subscription."  "The stream MUST terminate when the task
// reaches a terminal state".
let ended;
{
  const t = await polling.sendMessage(message('translate, then subscribe'));
  check(t.status?.state === SUBMITTED, 'returnImmediately: SUBMITTED at once', { state: t.status?.state });
  const got = await collect(blocking.resubscribeTask({ id: t.id }), async (ev, n) => {
    if (n === 1)
      await ask({ step: 'take', take: args.worker, text: 'abonné' });
  });
  check(got[0].kind === 'task' && got[0].state === SUBMITTED && got.length === 4 &&
        got[3].state === COMPLETED && got.map((e) => e.gen).join() === '1,2,3,4',
        '3.1.6: resubscribeTask after returnImmediately: the Task first, ending COMPLETED', got);
  ended = t.id;
}

// A2A 1.0 section 3.1.6, Errors: "UnsupportedOperationError: The operation
// is attempted on a task that is in a terminal state"; "TaskNotFoundError:
// The task ID does not exist or is not accessible."
await refused('3.1.6: resubscribeTask of a COMPLETED task: UnsupportedOperationError',
              () => blocking.resubscribeTask({ id: ended }), 'UnsupportedOperationError');
await refused('3.1.6: resubscribeTask of no such task: TaskNotFoundError',
              () => blocking.resubscribeTask({ id: 'a2a-0000000000000000000000000000000000000000' }),
              'TaskNotFoundError');

// A2A 1.0 section 3.7 gives no replay: after a disconnect a client "MAY
// not receive all status updates".  The hub's extension: every event
// numbered from the spool, Last-Event-ID gives what was missed.  The hub
// is SIGKILLed after WORKING; the task ends while it is down; the client
// comes back with the last generation it saw.
{
  const seen = [];
  let id;
  try {
    for await (const ev of blocking.sendMessageStream(message('translate, across a crash'))) {
      const b = brief(ev);
      seen.push(b);
      if (b.kind === 'task') {
        id = ev.payload.value.id;
        await ask({ step: 'take', take: args.worker });     // consumed: WORKING, no result yet
      }
      if (b.state === WORKING)
        await ask({ step: 'kill', kill: true, complete: id, text: 'après la panne' });
    }
  } catch (e) {
    say({ step: 'the stream cut by the SIGKILL', ok: true, detail: String(e.message).slice(0, 120) });
  }
  check(seen.map((e) => e.gen).join() === '1,2' && seen[1].state === WORKING,
        'before the cut: the Task (1), WORKING (2)', seen);
  const last = seen[seen.length - 1].gen;
  const more = await collect(blocking.resubscribeTask({ id },
                                                     { serviceParameters: { 'Last-Event-ID': String(last) } }));
  const all = seen.concat(more.slice(1));
  check(more[0].kind === 'task' && more[0].gen === last && more[0].state === WORKING &&
        all.map((e) => e.gen).join() === '1,2,3,4' && all[2].text === 'après la panne' &&
        all[3].state === COMPLETED,
        'resumed with Last-Event-ID after a hub SIGKILL: the Task as it was at 2, then 3 and 4, '
        + 'no event missed', { before: seen, after: more });
}
say({ step: 'end', ok: !failed, done: true });
process.exit(failed ? 1 : 0);
