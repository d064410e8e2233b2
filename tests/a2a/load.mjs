// Many SDK clients at once against handoff-hubd, the hub and handoffd
// SIGKILLed meanwhile by the test (tests/e2e/test_a2a_load.py):
//
//   node load.mjs '{"base": URL, "worker": NAME, "tokens": [T, ...], "per": N}'
//
// Each token is a client of the official A2A JavaScript SDK
// (@a2a-js/sdk, pinned) sending N messages, 5 at a time: the even ones
// with returnImmediately, the odd ones with sendMessageStream.  A send
// that fails (the hub is down) is sent again with the same messageId; a
// stream that is cut is resumed with Last-Event-ID (its last generation).
// At the end every task is read back with GetTask, and every streamed
// one is subscribed to again from its first event.  One JSON line on
// stdout: {"sent": [messageId, ...], "tasks": {taskId: state}, "streams":
// [{id, gens, states, again}], "retries", "resumes"}; progress lines
// {"progress": n} while it runs.
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';

const args = JSON.parse(process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const COMPLETED = 3;
const DEADLINE = Date.now() + 150000 * Number(process.env.HD_SLOW || 1);
let retries = 0, resumes = 0, done = 0;

async function client(token) {
  const handler = {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: createAuthenticatingFetchWithRetry(fetch, handler) })],
    clientConfig: { polling: true },
  }));
  for (;;) {
    try {
      return await factory.createFromUrl(`${args.base}/a2a/${args.worker}/`);
    } catch (e) {
      if (Date.now() > DEADLINE)
        throw e;
      await sleep(100);
    }
  }
}

// fn again until it works (the hub is down a moment), same arguments
async function again(fn) {
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > DEADLINE)
        throw e;
      retries++;
      await sleep(100);
    }
  }
}

const info = (ev) => {
  const p = ev.payload, v = p?.value;
  return { kind: p?.$case, id: p?.$case === 'task' ? v.id : v?.taskId,
           gen: v?.metadata?.generation,
           state: p?.$case === 'task' || p?.$case === 'statusUpdate' ? v.status?.state : undefined };
};

// A streamed message: its events, across cuts, until COMPLETED.
async function streamed(c, msg) {
  const got = [];
  let id;
  // a resumed stream begins with the Task as it was at the last event
  // the client had: that one it has already
  const take = async (iter, resumed) => {
    for await (const ev of iter) {
      const b = info(ev);
      id ||= b.id;
      if (resumed && b.kind === 'task' && b.gen === got[got.length - 1].gen) {
        resumed = false;
        continue;
      }
      got.push(b);
    }
  };
  for (;;) {
    try {
      if (!id)
        await take(c.sendMessageStream(msg));
      else
        await take(c.resubscribeTask({ id }, { serviceParameters: {
          'Last-Event-ID': String(got[got.length - 1].gen) } }), true);
    } catch (e) {
      // of an ended task whose last event we have: nothing more to come
      if (id && e.name === 'UnsupportedOperationError')
        return { id, got };
      if (Date.now() > DEADLINE)
        throw e;
      if (id)
        resumes++;
      else
        retries++;
      await sleep(100);
      continue;
    }
    if (got.length && got[got.length - 1].state === COMPLETED)
      return { id, got };
    // ended short of the end (its send answered with a cut stream)
    await sleep(50);
  }
}

const sent = [], streams = [], tasks = {};
const progress = setInterval(() => process.stdout.write(JSON.stringify({ progress: done }) + '\n'), 1000);

async function run(i) {
  const c = await client(args.tokens[i]);
  let next = 0;
  const one = async () => {
    for (let j; (j = next++) < args.per;) {
      const mid = `load-${i}-${j}-${randomUUID()}`;
      sent.push(mid);
      const msg = { message: { messageId: mid, role: 1, parts: [{ content: { $case: 'text',
                                                                               value: `message ${i}.${j}` } }] } };
      if (j % 2) {
        const s = await streamed(c, msg);
        streams.push({ client: i, id: s.id, got: s.got });
        tasks[s.id] = { client: i };
      } else {
        const t = await again(() => c.sendMessage({ ...msg, configuration: { returnImmediately: true } }));
        tasks[t.id] = { client: i };
      }
      done++;
    }
  };
  await Promise.all([one(), one(), one(), one(), one()]);
  return c;
}

const clients = await Promise.all(args.tokens.map((_, i) => run(i)));
clearInterval(progress);
process.stdout.write(JSON.stringify({ progress: done, sent: sent.length }) + '\n');

// every task to its end, read back
const states = {};
for (const [id, t] of Object.entries(tasks)) {
  let st;
  for (;;) {
    st = (await again(() => clients[t.client].getTask({ id }))).status?.state;
    if (st === COMPLETED || Date.now() > DEADLINE)
      break;
    await sleep(100);
  }
  states[id] = st;
}
// every stream resumable: from its first event, all of them again
const out = [];
for (const s of streams) {
  const again1 = [];
  for await (const ev of clients[s.client].resubscribeTask({ id: s.id }, { serviceParameters: {
    'Last-Event-ID': '1' } }))
    again1.push(info(ev));
  out.push({ id: s.id, gens: s.got.map((e) => e.gen), states: s.got.map((e) => e.state),
             again: again1.map((e) => [e.gen, e.state ?? e.kind]) });
}
// a pipe's write is asynchronous: exit once it is out
process.stdout.write(JSON.stringify({ sent, tasks: states, streams: out, retries, resumes }) + '\n',
                     () => process.exit(0));
