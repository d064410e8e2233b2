// handoffctl mcp driven by the official MCP TypeScript SDK (Client +
// StdioClientTransport), as an MCP host would drive it.  Run by
// tests/e2e/test_mcp.py against a real handoffd and spool:
//
//   node client.mjs HANDOFFCTL CONF VOX_PAYLOAD
//
// Agents bob and alice each get their own server.  bob sends a handoff to
// alice, alice's server announces it (notifications/resources/list_changed),
// alice reads and takes it there, bob's handoff_status says consumed; alice
// reports its result (handoff_complete) and bob's handoff_status has it.  Then
// every error path, through the SDK and as raw lines.  Prints one line per
// check; the last line is a JSON summary; exits 1 at the first failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ResourceListChangedNotificationSchema,
  EmptyResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { check, checks, text } from './kit.mjs';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';

const [HANDOFFCTL, CONF, VOX] = process.argv.slice(2);
const SLOW = Number(process.env.HD_SLOW || 1);


const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Resolves at the next list_changed of a client (or fails after a while).
function listChanged(state) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no list_changed within 10 s')), 10000 * SLOW);
    state.waiters.push(() => { clearTimeout(t); resolve(); });
  });
}

async function connect(agent) {
  const state = { waiters: [], changes: 0, version: null, stderr: '' };
  const transport = new StdioClientTransport({
    command: HANDOFFCTL,
    args: ['mcp', '-c', CONF, '--agent', agent],
    stderr: 'pipe',
  });
  transport.stderr.on('data', (d) => { state.stderr += d; });
  // The client hands the negotiated version to a transport that asks.
  transport.setProtocolVersion = (v) => { state.version = v; };
  const client = new Client({ name: `hd-test-${agent}`, version: '1.0.0' });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    state.changes++;
    const w = state.waiters.splice(0);
    w.forEach((f) => f());
  });
  await client.connect(transport);
  return { client, transport, state };
}

// The JSON-RPC error code of a call that must fail as a protocol error.
async function rpcError(p) {
  try {
    await p;
  } catch (e) {
    return e instanceof McpError ? e.code : `not an McpError: ${e}`;
  }
  return 'no error';
}


// ---- raw lines: what no SDK would send ---------------------------------

function rawServer(agent) {
  const p = spawn(HANDOFFCTL, ['mcp', '-c', CONF, '--agent', agent], { stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = '';
  const queue = [];
  const waiting = [];
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const msg = JSON.parse(line); // every line the server writes is one JSON message
      if (waiting.length) waiting.shift()(msg);
      else queue.push(msg);
    }
  });
  const next = () => new Promise((resolve, reject) => {
    if (queue.length) return resolve(queue.shift());
    const t = setTimeout(() => reject(new Error('no answer within 10 s')), 10000 * SLOW);
    waiting.push((m) => { clearTimeout(t); resolve(m); });
  });
  const send = (s) => new Promise((resolve) => p.stdin.write(s, resolve));
  return { p, next, send };
}

async function rawChecks() {
  const s = rawServer('bob');
  const init = (v, id) => s.send(JSON.stringify({
    jsonrpc: '2.0', id, method: 'initialize',
    params: { protocolVersion: v, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  }) + '\n');

  for (const [v, want] of [['2025-11-25', '2025-11-25'], ['2025-06-18', '2025-06-18'],
    ['2025-03-26', '2025-03-26'], ['2024-11-05', '2024-11-05'], ['1999-01-01', '2025-11-25'],
    ['2099-12-31', '2025-11-25']]) {
    await init(v, 'v-' + v);
    const m = await s.next();
    check(m.id === 'v-' + v && m.result.protocolVersion === want,
      `raw: initialize with ${v} is answered ${want}`, m);
  }
  await s.send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');

  await s.send('{this is not json\n');
  let m = await s.next();
  check(m.error && m.error.code === -32700 && m.id === null, 'raw: invalid JSON: -32700 (Parse error), id null', m);

  await s.send('{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}\n');
  m = await s.next();
  check(m.error && m.error.code === -32700, 'raw: a duplicate key: -32700', m);

  // Over 1 MiB, in pieces, with a valid request right behind it.
  const big = '{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + 'a'.repeat(1024 * 1024) + '"}}\n';
  await s.send(big.slice(0, 300000));
  await s.send(big.slice(300000) + '{"jsonrpc":"2.0","id":"after-big","method":"ping"}\n');
  m = await s.next();
  check(m.error && m.error.code === -32600 && m.id === null, 'raw: a line over 1 MiB: -32600 (Invalid Request)', m);
  m = await s.next();
  check(m.id === 'after-big' && m.result && Object.keys(m.result).length === 0,
    'raw: the request after the oversize line is answered', m);

  await s.send('[{"jsonrpc":"2.0","id":3,"method":"ping"}]\n');
  m = await s.next();
  check(m.error && m.error.code === -32600, 'raw: a batch (array): -32600', m);

  await s.send('{"jsonrpc":"1.0","id":4,"method":"ping"}\n');
  m = await s.next();
  check(m.error && m.error.code === -32600 && m.id === 4, 'raw: jsonrpc "1.0": -32600', m);

  await s.send('{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}\n');
  m = await s.next();
  check(m.error && m.error.code === -32600, 'raw: an object as id: -32600', m);

  await s.send('{"jsonrpc":"2.0","id":5,"method":"no/such/method"}\n');
  m = await s.next();
  check(m.error && m.error.code === -32601 && m.id === 5, 'raw: unknown method: -32601 (Method not found)', m);

  await s.send('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":[1]}\n');
  m = await s.next();
  check(m.error && m.error.code === -32602, 'raw: params not an object: -32602', m);

  await s.send('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"handoff_inbox","arguments":"x"}}\n');
  m = await s.next();
  check(m.error && m.error.code === -32602, 'raw: arguments not an object: -32602', m);

  await s.send('\n   \n{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n');
  await s.send('{"jsonrpc":"2.0","id":8,"method":"ping"}\r\n');
  m = await s.next();
  check(m.id === 8 && m.result, 'raw: blank lines and notifications get no answer; CRLF is fine', m);

  // A last line without its newline, then EOF: answered, and a clean exit.
  await s.send('{"jsonrpc":"2.0","id":9,"method":"ping"}');
  s.p.stdin.end();
  m = await s.next();
  check(m.id === 9 && m.result, 'raw: a last line without newline is answered at EOF', m);
  const code = await new Promise((r) => s.p.on('exit', (c) => r(c)));
  check(code === 0, 'raw: the server exits 0 when stdin closes', code);
}

// ---- the SDK ------------------------------------------------------------

async function main() {
  const bob = await connect('bob');
  const alice = await connect('alice');
  check(bob.client.getServerVersion().name === 'handoffctl', 'initialize: serverInfo.name handoffctl');
  check(bob.state.version === '2025-11-25',
    `SDK asked for its newest version; the server answered 2025-11-25`, bob.state.version);
  const caps = bob.client.getServerCapabilities();
  check(caps.tools && caps.resources && caps.resources.listChanged === true,
    'capabilities: tools, resources with listChanged', caps);
  await bob.client.ping();
  check(true, 'ping');

  const { tools } = await bob.client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(['handoff_complete', 'handoff_inbox', 'handoff_send',
    'handoff_status', 'handoff_take']), 'tools/list: the five tools', names);
  for (const t of tools)
    check(t.inputSchema.type === 'object' && t.outputSchema && t.outputSchema.type === 'object' && t.description,
      `tools/list: ${t.name} has input and output schemas and a description`);
  await alice.client.listTools(); // the SDK checks structuredContent against outputSchema from here on

  let r = await alice.client.listResources();
  check(r.resources.length === 0, 'alice: no resources before anything was sent', r);
  const tmpl = await alice.client.listResourceTemplates();
  check(tmpl.resourceTemplates[0].uriTemplate === 'handoff://inbox/{handoff_id}', 'resources/templates/list');

  // bob -> alice
  const arrived = listChanged(alice.state);
  const t0 = performance.now();
  const vox = JSON.parse(readFileSync(VOX, 'utf8'));
  const sent = await bob.client.callTool({
    name: 'handoff_send',
    arguments: {
      to_agent: 'alice', reason: 'OAuth flow, tests half green',
      context: 'Token refresh fails against staging; see the vox payload.',
      transcript: [{ role: 'user', text: 'get the auth tests green' }, { role: 'assistant', text: 'handing over' }],
      payload_type: 'vox/1.0', payload: vox, ttl_seconds: 600,
    },
  });
  check(!sent.isError && sent.structuredContent && /^[0-9]+-bob-alice-[0-9a-f]{16}$/.test(sent.structuredContent.handoff_id),
    'bob: handoff_send returns a handoff_id', sent);
  check(text(sent).includes(sent.structuredContent.handoff_id), 'bob: handoff_send has a text rendering');
  const id = sent.structuredContent.handoff_id;

  await arrived;
  const arrivalMs = performance.now() - t0;
  check(true, `alice: notifications/resources/list_changed on arrival (${arrivalMs.toFixed(1)} ms after handoff_send was called)`);
  r = await alice.client.listResources();
  const uri = `handoff://inbox/${id}`;
  check(r.resources.length === 1 && r.resources[0].uri === uri && r.resources[0].mimeType === 'application/json',
    'alice: resources/list has handoff://inbox/<id>', r);
  const read = await alice.client.readResource({ uri });
  const boot = JSON.parse(read.contents[0].text);
  check(boot.handoff_id === id && boot.from_agent === 'bob' && boot.resume_context.includes('Token refresh'),
    'alice: resources/read gives the bootstrap', boot);
  r = await alice.client.listResources();
  check(r.resources.length === 1, 'alice: reading a resource does not take it');

  const inbox = await alice.client.callTool({ name: 'handoff_inbox', arguments: {} });
  const h = inbox.structuredContent.handoffs;
  check(h.length === 1 && h[0].handoff_id === id && h[0].from_agent === 'bob' && h[0].seconds_left > 0,
    'alice: handoff_inbox lists it with sender and time left', inbox.structuredContent);
  check(text(inbox).includes(id), 'alice: handoff_inbox text names it');

  let st = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: id } });
  check(st.structuredContent.status === 'claimed', 'bob: handoff_status says claimed before the take', st.structuredContent);

  const left = listChanged(alice.state);
  const took = await alice.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
  const sc = took.structuredContent;
  check(!took.isError && sc.handoff_id === id && sc.from_agent === 'bob' && sc.payload_type === 'vox/1.0' &&
    sc.payload.goal === vox.goal && sc.resume_context.includes('Token refresh'),
    'alice: handoff_take returns the context and the payload', sc);
  await left;
  check(true, 'alice: list_changed when it leaves');
  r = await alice.client.listResources();
  check(r.resources.length === 0, 'alice: the inbox is empty after the take');

  const again = await alice.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
  check(again.isError === true && text(again).length > 0 && !text(again).includes('\n'),
    'alice: taking it again is a tool error with a one-line reason', again);
  const none = await alice.client.callTool({ name: 'handoff_take', arguments: {} });
  check(none.isError === true, 'alice: handoff_take of the oldest with none waiting: tool error', none);

  // The daemon archives it once the bootstrap is gone.
  let status;
  for (let i = 0; i < 100 * SLOW; i++) {
    st = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: id } });
    status = st.structuredContent.status;
    if (status === 'consumed') break;
    await sleep(100);
  }
  check(status === 'consumed' && st.structuredContent.to_agent === 'alice', 'bob: handoff_status says consumed', st.structuredContent);
  check(st.structuredContent.result === undefined, 'bob: no result before alice reports one', st.structuredContent);

  // alice reports what came of it; bob reads it
  const data = { tests: { passed: 41, failed: 0 }, files: ['auth.c'], note: 'ümlaut' };
  const done = await alice.client.callTool({ name: 'handoff_complete', arguments: { handoff_id: id, data } });
  check(!done.isError && done.structuredContent.status === 'completed' && done.structuredContent.recorded === true,
    'alice: handoff_complete with data: recorded', done);
  st = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: id } });
  const res = st.structuredContent.result;
  check(st.structuredContent.status === 'consumed' && res && res.status === 'completed' && res.agent === 'alice' &&
    isDeepStrictEqual(res.data, data) && res.recorded_at,
    'bob: handoff_status has alice\'s result, the data whole', st.structuredContent);
  check(text(st).includes('alice reported it completed'), 'bob: handoff_status text says so', text(st));
  const twice = await alice.client.callTool({ name: 'handoff_complete', arguments: { handoff_id: id, text: 'again' } });
  check(twice.isError === true && text(twice).includes('already_completed'),
    'alice: a second handoff_complete: tool error already_completed', text(twice));
  const notMine = await bob.client.callTool({ name: 'handoff_complete',
    arguments: { handoff_id: id, failed: 'bob did not take it' } });
  check(notMine.isError === true && text(notMine).includes('not_consumed'),
    'bob: handoff_complete of a handoff he did not take: tool error not_consumed', text(notMine));
  const never = await alice.client.callTool({ name: 'handoff_complete', arguments: { handoff_id: 'never-sent-2' } });
  check(never.isError === true && text(never).includes('not_consumed'),
    'alice: handoff_complete of an id never sent: tool error not_consumed', text(never));
  check(await rpcError(alice.client.callTool({ name: 'handoff_complete', arguments: { handoff_id: id, failed: '' } })) === -32602,
    'handoff_complete with an empty failed: -32602');

  // ---- error paths through the SDK ----
  check(await rpcError(bob.client.callTool({ name: 'no_such_tool', arguments: {} })) === -32602,
    'unknown tool: JSON-RPC error -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 5 } })) === -32602,
    'handoff_send with reason a number: -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { reason: 'x' } })) === -32602,
    'handoff_send without to_agent: -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', ttl_seconds: 1.5 } })) === -32602,
    'handoff_send with a fractional ttl_seconds: -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', ttl_seconds: 0 } })) === -32602,
    'handoff_send with ttl_seconds 0 (below the minimum): -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', colour: 'red' } })) === -32602,
    'handoff_send with an unknown argument: -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', transcript: [{ role: 'robot', text: 'x' }] } })) === -32602,
    'handoff_send with a transcript role outside the enum: -32602');
  check(await rpcError(bob.client.callTool({ name: 'handoff_status', arguments: {} })) === -32602,
    'handoff_status without handoff_id: -32602');
  check(await rpcError(bob.client.readResource({ uri: 'handoff://inbox/no-such-id' })) === -32602,
    'resources/read of an unknown uri: -32602');
  check(await rpcError(bob.client.readResource({ uri: 'file:///etc/passwd' })) === -32602,
    'resources/read of a foreign uri: -32602');
  check(await rpcError(bob.client.request({ method: 'no/such/method', params: {} }, EmptyResultSchema)) === -32601,
    'unknown method: -32601');

  let e = await bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'Not An Agent', reason: 'x' } });
  check(e.isError === true && /^bad_agent: /.test(text(e)), 'handoff_send to a bad agent name: tool error bad_agent', e);
  e = await bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'bob', reason: 'x' } });
  check(e.isError === true && /^self_handoff: /.test(text(e)), 'handoff_send to itself: tool error self_handoff', e);
  const badVox = { ...vox };
  delete badVox.goal;
  e = await bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', payload_type: 'vox/1.0', payload: badVox } });
  check(e.isError === true && text(e).startsWith('payload_invalid: ') && text(e).includes("'goal'"),
    'handoff_send with an invalid payload: tool error naming the field', text(e));
  e = await bob.client.callTool({ name: 'handoff_send', arguments: { to_agent: 'alice', reason: 'x', payload: vox } });
  check(e.isError === true, 'handoff_send with payload but no payload_type: tool error', e);
  e = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: 'never-sent-1' } });
  check(e.isError === true, 'handoff_status of an id never sent: tool error', e);
  e = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: '../../etc' } });
  check(e.isError === true, 'handoff_status of a malformed id: tool error', e);

  // Garbage on the SDK's own connection: the server answers and lives on.
  bob.transport._process.stdin.write('{broken\n' + 'z'.repeat(1100 * 1024) + '\n');
  await bob.client.ping();
  check(true, 'after garbage on its stdin the server still answers the SDK');

  await rawChecks();

  await bob.client.close();
  await alice.client.close();
  check(!/AddressSanitizer|runtime error/.test(bob.state.stderr + alice.state.stderr),
    'no sanitizer report on the servers\' stderr', bob.state.stderr + alice.state.stderr);
  console.log(JSON.stringify({ handoff_id: id, checks: checks(), alice_list_changed: alice.state.changes,
    send_to_list_changed_ms: Math.round(arrivalMs * 10) / 10 }));
}

main().catch((e) => {
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
