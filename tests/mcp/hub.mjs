// handoff-hubd's /mcp driven by the official MCP TypeScript SDK (Client +
// StreamableHTTPClientTransport), as a remote MCP host would drive it, and
// the same scenario through handoffctl mcp (StdioClientTransport) to show
// that the two transports serve one tool table with the same answers.
// Run by tests/e2e/test_mcp_hub.py against a real handoffd, spool and hub:
//
//   node hub.mjs URL TOKENS_JSON HANDOFFCTL CONF
//
// TOKENS_JSON: {"alice": TOKEN, "bob": TOKEN}.  bob's client lists the
// tools and sends to alice; alice's client (her own token) gets
// notifications/resources/list_changed on the session's stream, finds the
// handoff in her inbox and takes it with its context; bob's
// handoff_status says consumed; alice reports the result.  A wrong token,
// another agent's handoff and another agent's session are refused.  Prints
// one line per check; the last line is a JSON summary.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, checks, text } from './kit.mjs';
import { isDeepStrictEqual } from 'node:util';

const [URL_, TOKENS, HANDOFFCTL, CONF] = process.argv.slice(2);
const tokens = JSON.parse(TOKENS);
const SLOW = Number(process.env.HD_SLOW || 1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function listChanged(state) {
  return new Promise((resolve, reject) => {
    if (state.changes > state.seen) { state.seen = state.changes; return resolve(); }
    const t = setTimeout(() => reject(new Error('no list_changed within 10 s')), 10000 * SLOW);
    state.waiters.push(() => { clearTimeout(t); state.seen = state.changes; resolve(); });
  });
}

// Until the hub's /metrics counts n MCP streams open (10 s at most).
async function streamsOpen(n) {
  const deadline = Date.now() + 10000 * SLOW;
  let seen = null;
  while (Date.now() < deadline) {
    const m = await (await fetch(new URL('/metrics', URL_))).text();
    const line = m.split('\n').find((l) => l.startsWith('handoff_hub_mcp_streams '));
    seen = line ? Number(line.split(' ')[1]) : null;
    if (seen >= n) return;
    await sleep(20);
  }
  throw new Error(`handoff_hub_mcp_streams ${seen}, not ${n}, within 10 s`);
}

function httpTransport(agent, token) {
  return new StreamableHTTPClientTransport(new URL(URL_), {
    requestInit: { headers: { Authorization: `Bearer ${token ?? tokens[agent]}` } },
  });
}

function stdioTransport(agent) {
  return new StdioClientTransport({ command: HANDOFFCTL, args: ['mcp', '-c', CONF, '--agent', agent],
    stderr: 'pipe' });
}

async function connect(agent, kind) {
  const state = { waiters: [], changes: 0, seen: 0 };
  const transport = kind === 'http' ? httpTransport(agent) : stdioTransport(agent);
  const client = new Client({ name: `hd-test-${agent}`, version: '1.0.0' });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    state.changes++;
    state.waiters.splice(0).forEach((f) => f());
  });
  await client.connect(transport);
  return { client, transport, state };
}

// What an answer says once the handoff's own id and the times are taken out.
function norm(v, id) {
  const drop = new Set(['age_s', 'seconds_left', 'accepted_at', 'at', 'expires_at', 'completed_at',
    'recorded_at', 'kid']);
  if (typeof v === 'string') {
    return (id ? v.split(id).join('ID') : v).replace(/\d+s old, \d+s left/g, 'Ns old, Ns left');
  }
  if (Array.isArray(v)) return v.map((x) => norm(x, id));
  if (v && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v).sort()) if (!drop.has(k)) o[k] = norm(v[k], id);
    return o;
  }
  return v;
}

// The scenario, on one transport: its answers, normalized, in order.
async function scenario(kind) {
  const say = (w) => `${kind}: ${w}`;
  const log = [];
  const bob = await connect('bob', kind);
  const alice = await connect('alice', kind);
  const { tools } = await bob.client.listTools();
  check(isDeepStrictEqual(tools.map((t) => t.name).sort(),
    ['handoff_complete', 'handoff_inbox', 'handoff_send', 'handoff_status', 'handoff_take']),
  say('bob lists the five tools'), tools.map((t) => t.name));
  log.push(['tools/list', tools]);
  // The SDK opens each client's GET stream after notifications/initialized,
  // without waiting for it: the hub counts them (handoff_hub_mcp_streams),
  // bob's and alice's.  handoffctl mcp watches its inbox before it reads
  // its first message.
  if (kind === 'http') await streamsOpen(2);

  const sendAt = Date.now();
  const sent = await bob.client.callTool({ name: 'handoff_send', arguments: {
    to_agent: 'alice', reason: 'the tests are half green',
    context: 'Token refresh fails against staging; resume from the failing test.' } });
  check(!sent.isError, say('bob sends to alice'), sent);
  const id = sent.structuredContent.handoff_id;
  log.push(['send', norm(sent, id)]);

  await listChanged(alice.state);
  const notified = Date.now() - sendAt;
  check(true, say(`alice is told: notifications/resources/list_changed after ${notified} ms`));
  let inbox;
  for (let i = 0; i < 50; i++) {
    inbox = await alice.client.callTool({ name: 'handoff_inbox', arguments: {} });
    if (inbox.structuredContent.handoffs.some((h) => h.handoff_id === id)) break;
    await sleep(100 * SLOW);
  }
  check(inbox.structuredContent.handoffs.some((h) => h.handoff_id === id && h.from_agent === 'bob'),
    say('alice finds it in her inbox, from bob'), inbox.structuredContent);
  log.push(['inbox', norm(inbox, id)]);
  const res = await alice.client.listResources();
  check(res.resources.some((r) => r.uri === `handoff://inbox/${id}`), say('and as a resource'), res);

  // another agent's handoff: bob can neither take it nor complete it
  const steal = await bob.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
  check(steal.isError && /waiting for bob/.test(text(steal)), say('bob cannot take alice\'s handoff'),
    text(steal));
  log.push(['bob takes', norm(steal, id)]);

  const took = await alice.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
  check(!took.isError && took.structuredContent.resume_context.includes(
    'Token refresh fails against staging; resume from the failing test.') &&
    took.structuredContent.from_agent === 'bob', say('alice takes it with its context'), took);
  log.push(['take', norm(took, id)]);
  const again = await alice.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
  check(again.isError, say('a second take gets nothing'), text(again));
  log.push(['take again', norm(again, id)]);

  let st;
  for (let i = 0; i < 100; i++) {
    st = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: id } });
    if (st.structuredContent && st.structuredContent.status === 'consumed') break;
    await sleep(100 * SLOW);
  }
  check(st.structuredContent.status === 'consumed', say('bob\'s handoff_status says consumed'), st);
  log.push(['status', norm(st, id)]);

  const bobDone = await bob.client.callTool({ name: 'handoff_complete',
    arguments: { handoff_id: id, text: 'not mine' } });
  check(bobDone.isError, say('bob cannot complete a handoff alice took'), text(bobDone));
  log.push(['bob completes', norm(bobDone, id)]);
  const done = await alice.client.callTool({ name: 'handoff_complete',
    arguments: { handoff_id: id, data: { tests: { passed: 41, failed: 0 } } } });
  check(!done.isError && done.structuredContent.recorded === true,
    say('alice reports the result, and the daemon recorded it'), done);
  log.push(['complete', norm(done, id)]);
  for (let i = 0; i < 100; i++) {
    st = await bob.client.callTool({ name: 'handoff_status', arguments: { handoff_id: id } });
    if (st.structuredContent.result) break;
    await sleep(100 * SLOW);
  }
  check(st.structuredContent.result && st.structuredContent.result.agent === 'alice',
    say('bob sees her result'), st.structuredContent);
  log.push(['status with result', norm(st, id)]);

  await bob.client.close();
  await alice.client.close();
  return { log, id, notified };
}

async function refusals() {
  // a token not in token_dir: 401 at initialize
  let err = null;
  try {
    const c = new Client({ name: 'hd-test-wrong', version: '1.0.0' });
    await c.connect(httpTransport('bob', 'not-a-token-of-ours'));
  } catch (e) {
    err = e;
  }
  check(err && /401/.test(String(err.code ?? '') + String(err.message)),
    'http: a wrong token is refused (401)', String(err));

  // alice's session with bob's token: not found (404), as if it never was
  const alice = await connect('alice', 'http');
  const sid = alice.transport.sessionId;
  const r = await fetch(URL_, { method: 'POST', headers: {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${tokens.bob}`, 'Mcp-Session-Id': sid,
    'MCP-Protocol-Version': '2025-11-25' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
  check(r.status === 404, 'http: another agent\'s session is not found (404)', r.status);
  // the session ends with DELETE (terminateSession), and is gone after
  await alice.transport.terminateSession();
  const g = await fetch(URL_, { method: 'POST', headers: {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${tokens.alice}`, 'Mcp-Session-Id': sid },
  body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  check(g.status === 404, 'http: a session ended with DELETE is not found (404)', g.status);
  await alice.client.close();
}

async function main() {
  const http = await scenario('http');
  const stdio = await scenario('stdio');
  check(http.log.length === stdio.log.length, 'both transports went through the same steps');
  for (let i = 0; i < http.log.length; i++) {
    check(isDeepStrictEqual(http.log[i], stdio.log[i]),
      `the same answer over /mcp and handoffctl mcp: ${http.log[i][0]}`,
      { http: http.log[i][1], stdio: stdio.log[i][1] });
  }
  await refusals();
  console.log(JSON.stringify({ checks: checks(), handoff_id: http.id, stdio_handoff_id: stdio.id,
    http_send_to_list_changed_ms: http.notified }));
}

main().catch((e) => {
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
