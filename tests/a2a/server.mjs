// An A2A server built with the official SDK's server classes
// (@a2a-js/sdk/server: DefaultRequestHandler, InMemoryTaskStore; express
// and jsonRpcHandler), the remote agent of tests/e2e/test_a2a_out.py:
//
//   node server.mjs '{"port": P, "token": T, "log": FILE}'
//
// Its executor ends each task by the text of the message: "fail" failed,
// "input" input-required, "forever" never (working), else completed with
// an artifact "done: TEXT".
// A message whose text holds "refuse" is answered 400 before the SDK sees
// it.  Every message the executor runs appends its messageId to FILE (it
// outlives a restart): the test counts by messageId; with "parts": FILE2
// too, each message's parts as one JSON line.  Prints "listening"
// once it listens; SIGTERM closes the listener and lets the requests in
// flight end before it exits.
//
// Knobs for the tests of handoffd's sender (all optional):
//   "sends": FILE        each SendMessage that passes the token appends
//                        {messageId, contextId, idempotencyKey} as a line
//   "calls": FILE        every JSON-RPC call appends {method, id (GetTask's
//                        task), t (ms)} as a line
//   "answer_delay_ms": N every answer held N ms after the handler made it
//                        (the task stored, its answer not yet sent)
//   "no_list": true      ListTasks answered -32601 (a server without it)
//   "refuse_file": FILE  while FILE exists every request is answered 401
//                        (a token the server no longer takes)
//   "hold_file": FILE    while FILE exists every answer is held (made, not
//                        sent); they go once it is removed
//   "streaming": true    the card says capabilities.streaming (SubscribeToTask)
//   "no_subscribe": true SubscribeToTask answered -32004 (unsupported)
//   "complete_file": F   a message whose text holds "later" is working until
//                        F exists, then completed with a text and a data part
//   "card_key": {d, x, kid} the card served signed (A2A 1.0 section 8.4: a
//                        JWS, alg EdDSA, over the JCS bytes of the card
//                        without "signatures"), d and x the Ed25519 seed
//                        and public key, base64url
//   "card_tamper": true  the signed card's description changed after signing
// With "calls", a SubscribeToTask's first event written to its stream
// appends {method: "SubscribeToTask:open", id} (the stream is attached).
// and by the message's text: "two artifacts" ends completed with two
// artifacts, the second a text and a data part; "forget" is working, and
// 300 ms later the store forgets the task (GetTask: TaskNotFound).
import express from 'express';
import { appendFileSync, existsSync } from 'node:fs';
import { createPrivateKey, sign } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const args = JSON.parse(process.argv[2]);
// "card_interface": URL names another JSON-RPC interface in the card
const url = args.card_interface ?? `http://127.0.0.1:${args.port}/a2a`;

const card = {
  name: 'remote', description: 'the remote agent of test_a2a_out', version: '1.0.0',
  supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  provider: undefined, capabilities: { streaming: !!args.streaming, pushNotifications: false, extensions: [] },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'], skills: [], signatures: [],
};

const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined,
  filename: '', mediaType: 'text/plain' });

class Executor {
  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const text = msg.parts.filter((p) => p.content?.$case === 'text')
      .map((p) => p.content.value).join(' ');
    appendFileSync(args.log, msg.messageId + '\n');
    if (args.parts)
      appendFileSync(args.parts, JSON.stringify({ messageId: msg.messageId, parts: msg.parts }) + '\n');
    const now = () => new Date().toISOString();
    const base = { taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined };
    bus.publish({ kind: 'task', data: { id: ctx.taskId, contextId: ctx.contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
      artifacts: [], history: [msg], metadata: undefined } });
    if (/later/.test(text) && args.complete_file) {
      bus.publish({ kind: 'statusUpdate', data: { ...base, status: {
        state: TaskState.TASK_STATE_WORKING, timestamp: now(), message: undefined } } });
      // execute() ends with the task: its event bus stays for a subscriber
      let resolve;
      const ended = new Promise((r) => { resolve = r; });
      const done = () => {
        if (!existsSync(args.complete_file))
          return setTimeout(done, 20);
        bus.publish({ kind: 'artifactUpdate', data: { ...base, append: false, lastChunk: true,
          artifact: { artifactId: 'result', name: 'result', description: '',
            parts: [textPart(`done: ${text}`), { content: { $case: 'data', value: { late: true } },
              metadata: undefined, filename: '', mediaType: 'application/json' }],
            metadata: undefined, extensions: [] } } });
        bus.publish({ kind: 'statusUpdate', data: { ...base, status: {
          state: TaskState.TASK_STATE_COMPLETED, timestamp: now(), message: undefined } } });
        bus.finished();
        resolve();
      };
      done();
      await ended;
      return;
    }
    if (/forever|forget/.test(text)) {
      // a task that never ends: working at every GetTask
      bus.publish({ kind: 'statusUpdate', data: { ...base, status: {
        state: TaskState.TASK_STATE_WORKING, timestamp: now(), message: undefined } } });
      bus.finished();
      if (/forget/.test(text))
        setTimeout(() => forgotten.add(ctx.taskId), 300);
      return;
    }
    const state = /fail/.test(text) ? TaskState.TASK_STATE_FAILED
      : /input/.test(text) ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_COMPLETED;
    if (state === TaskState.TASK_STATE_COMPLETED)
      bus.publish({ kind: 'artifactUpdate', data: { ...base, append: false, lastChunk: true,
        artifact: { artifactId: 'result', name: 'result', description: '',
          parts: [textPart(`done: ${text}`)], metadata: undefined, extensions: [] } } });
    if (state === TaskState.TASK_STATE_COMPLETED && /two artifacts/.test(text))
      bus.publish({ kind: 'artifactUpdate', data: { ...base, append: false, lastChunk: true,
        artifact: { artifactId: 'table', name: 'table', description: 'the figures',
          parts: [textPart('the figures follow'), { content: { $case: 'data',
            value: { rows: [[1, 'one'], [2, 'two']], total: 3 } }, metadata: undefined,
            filename: '', mediaType: 'application/json' }],
          metadata: undefined, extensions: [] } } });
    const say = state === TaskState.TASK_STATE_FAILED ? 'it failed on purpose'
      : state === TaskState.TASK_STATE_INPUT_REQUIRED ? 'which one do you mean?' : undefined;
    bus.publish({ kind: 'statusUpdate', data: { ...base, status: { state, timestamp: now(),
      message: say && { messageId: `${msg.messageId}-answer`, contextId: ctx.contextId,
        taskId: ctx.taskId, role: 2, parts: [textPart(say)], metadata: undefined,
        extensions: [], referenceTaskIds: [] } } } });
    bus.finished();
  }

  async cancelTask() {}
}

// A store that forgets the tasks of "forget" (as one in memory does
// across a restart).
const forgotten = new Set();
class ForgetfulStore extends InMemoryTaskStore {
  async load(taskId, context) {
    return forgotten.has(taskId) ? undefined : super.load(taskId, context);
  }
}
const handler = new DefaultRequestHandler(card, new ForgetfulStore(), new Executor());
const app = express();
// RFC 8785 for the card's values (strings, booleans, arrays, objects)
const jcs = (v) => Array.isArray(v) ? `[${v.map(jcs).join(',')}]`
  : v !== null && typeof v === 'object'
    ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${jcs(v[k])}`).join(',')}}`
    : JSON.stringify(v);
if (args.card_key)
  app.get('/.well-known/agent-card.json', (req, res) => {
    const c = JSON.parse(JSON.stringify(card));   // as served: no undefined members
    delete c.signatures;
    const prot = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'JOSE',
      kid: args.card_key.kid })).toString('base64url');
    const key = createPrivateKey({ format: 'jwk', key: { kty: 'OKP', crv: 'Ed25519',
      d: args.card_key.d, x: args.card_key.x } });
    const sig = sign(null, Buffer.from(`${prot}.${Buffer.from(jcs(c)).toString('base64url')}`), key);
    c.signatures = [{ protected: prot, signature: sig.toString('base64url') }];
    if (args.card_tamper)
      c.description += ' (changed)';
    res.json(c);
  });
// the card, public, as the SDK serves it (no token)
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a', express.json({ limit: '8mb' }), (req, res, next) => {
  if (args.calls)       // before the token's check: refused calls too
    appendFileSync(args.calls, JSON.stringify({ method: req.body?.method,
      id: req.body?.params?.id ?? null, t: Date.now() }) + '\n');
  if (args.calls && req.body?.method === 'SubscribeToTask') {
    const write = res.write.bind(res);
    let first = true;
    res.write = (...a) => {
      if (first)
        appendFileSync(args.calls, JSON.stringify({ method: 'SubscribeToTask:open',
          id: req.body.params?.id ?? null, t: Date.now() }) + '\n');
      first = false;
      return write(...a);
    };
  }
  if (args.no_subscribe && req.body?.method === 'SubscribeToTask')
    return res.json({ jsonrpc: '2.0', id: req.body.id,
      error: { code: -32004, message: 'Unsupported operation' } });
  next();
});
app.use('/a2a', (req, res, next) => {
  if (req.get('authorization') !== `Bearer ${args.token}` ||
      (args.refuse_file && existsSync(args.refuse_file)))
    return res.status(401).json({ error: 'bad token' });
  next();
});
app.use('/a2a', express.json({ limit: '8mb' }), (req, res, next) => {
  const parts = req.body?.params?.message?.parts ?? [];
  if (parts.some((p) => typeof p.text === 'string' && p.text.includes('refuse')))
    return res.status(400).json({ jsonrpc: '2.0', id: req.body.id,
      error: { code: -32602, message: 'this agent refuses that' } });
  next();
});
app.use('/a2a', (req, res, next) => {
  const m = req.body?.params?.message;
  if (args.sends && req.body?.method === 'SendMessage')
    appendFileSync(args.sends, JSON.stringify({ messageId: m?.messageId, contextId: m?.contextId,
      idempotencyKey: req.get('idempotency-key') ?? null }) + '\n');
  if (args.no_list && req.body?.method === 'ListTasks')
    return res.json({ jsonrpc: '2.0', id: req.body.id,
      error: { code: -32601, message: 'Method not found' } });
  if (args.hold_file) {
    const end = res.end.bind(res);
    const go = (a) => existsSync(args.hold_file) ? setTimeout(() => go(a), 20) : end(...a);
    res.end = (...a) => { go(a); return res; };
  }
  if (args.answer_delay_ms) {
    const end = res.end.bind(res);
    res.end = (...a) => { setTimeout(() => end(...a), args.answer_delay_ms); return res; };
  }
  next();
});
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(args.port, '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
