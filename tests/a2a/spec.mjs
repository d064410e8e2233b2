// What a client of the official A2A JavaScript SDK (@a2a-js/sdk) meets
// when it is written the plain way: the endpoint without its trailing
// slash, ListTasks with no filter, the root card.  Run by
// tests/e2e/test_a2a_spec.py against a real hub and daemon:
//
//   node spec.mjs '{"base": URL, "agent": NAME, "token": T}'
//
// One JSON line per step on stdout ({"step", "ok", ...}); the last has
// "done".  Exits 1 at the first failure.
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';

const args = JSON.parse(process.argv[2]);
const ROLE_USER = 1;
const sent = [];        // the JSON-RPC bodies the SDK sent, as it sent them

function say(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

function check(cond, step, detail) {
  say({ step, ok: !!cond, detail });
  if (!cond)
    process.exit(1);
}

function factory(token) {
  const recording = async (url, init) => {
    if (init?.body)
      sent.push(JSON.parse(init.body));
    return fetch(url, init);
  };
  const fetchImpl = createAuthenticatingFetchWithRetry(recording, {
    headers: async () => (token ? { Authorization: `Bearer ${token}` } : {}),
    shouldRetryWithHeaders: async () => undefined,
  });
  return new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    clientConfig: { polling: true },
  }));
}

const steps = new Set(args.steps ?? ['card', 'list']);

if (steps.has('card')) {
  // issue 47.2: the natural call, no trailing slash.  The SDK resolves
  // the card relative to the URL: /a2a/.well-known/agent-card.json, one
  // level up; it reports the status only, so the body is fetched as a
  // person who reads the SDK's error would.
  let err = null;
  try {
    await factory(args.token).createFromUrl(`${args.base}/a2a/${args.agent}`);
  } catch (e) {
    err = String(e.message);
  }
  const m = /from (\S+): 404/.exec(err ?? '');
  check(m && m[1] === `${args.base}/a2a/.well-known/agent-card.json`,
        'createFromUrl without the slash: the SDK fetched /a2a/.well-known/agent-card.json, 404',
        { error: err });
  const r = await fetch(m[1]);
  const body = await r.json();
  check(r.status === 404 && body.card === '/a2a/NAME/.well-known/agent-card.json' &&
        body.detail.includes('/a2a/NAME/.well-known/agent-card.json') &&
        body.detail.includes('trailing slash') && body.detail.includes(`${args.base}/a2a/NAME/`),
        'that 404 says where the card is and how to ask', body);
  const bob = await factory(args.token).createFromUrl(`${args.base}/a2a/${args.agent}/`);
  check(bob.agentCard.name === args.agent, 'createFromUrl with the slash: the card',
        { name: bob.agentCard.name });
}

if (steps.has('list')) {
  // issue 47.12: ListTasks from plain JS, no status given
  const bob = await factory(args.token).createFromUrl(`${args.base}/a2a/${args.agent}/`);
  const task = await bob.sendMessage({
    message: { messageId: randomUUID(), role: ROLE_USER,
               parts: [{ content: { $case: 'text', value: 'list me' } }] },
    configuration: { returnImmediately: true },
  });
  sent.length = 0;
  const list = await bob.listTasks({ pageSize: 10 });
  const req = sent.find((b) => b.method === 'ListTasks');
  check(req?.params?.status === 'UNRECOGNIZED',
        'the SDK sent an unset status as "UNRECOGNIZED"', { params: req?.params });
  check(list.tasks.some((t) => t.id === task.id), 'ListTasks without a status: every task',
        { ids: list.tasks.map((t) => t.id), totalSize: list.totalSize });
}

if (steps.has('root')) {
  // the domain's card, /.well-known/agent-card.json (A2A 1.0 section 8.2)
  const c = await factory(args.token).createFromUrl(`${args.base}/`);
  check(c.agentCard.name === args.root.name &&
        JSON.stringify(c.agentCard.supportedInterfaces.map((i) => i.url)) ===
        JSON.stringify(args.root.urls),
        'createFromUrl of the host: the root card', { name: c.agentCard.name,
          urls: c.agentCard.supportedInterfaces.map((i) => i.url) });
  if (args.root.send) {
    const t = await c.sendMessage({
      message: { messageId: randomUUID(), role: ROLE_USER,
                 parts: [{ content: { $case: 'text', value: 'by the root card' } }] },
      configuration: { returnImmediately: true },
    });
    check(t.id?.startsWith('a2a-'), 'a message through the interface the SDK picked of the root card',
          { id: t.id });
    say({ step: 'sent', task: t.id });
  }
}
say({ step: 'end', ok: true, done: true });
process.exit(0);
