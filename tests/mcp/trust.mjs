// handoffctl mcp and the proof of origin, driven by the official MCP
// TypeScript SDK (Client + StdioClientTransport).  Run by
// tests/e2e/test_mcp_trust.py, which starts handoffd, plants the forged
// files and checks the spool between the two steps:
//
//   node trust.mjs send HANDOFFCTL CONF KEY
//       bob's server, signing with KEY (an Ed25519 key): handoff_send to
//       alice.  Prints {"handoff_id": ...}.
//   node trust.mjs take HANDOFFCTL CONF GENUINE_ID FORGED_ID:REASON...
//       alice's server: handoff_inbox and resources/list show only the
//       genuine one, as its signed handoff says; handoff_take of each forged
//       bootstrap is a tool error naming REASON and leaves the file;
//       resources/read of one is not found; handoff_take without an id
//       takes the genuine one, with what its signed handoff says; then
//       only forged ones are left: a tool error.
//
// Prints one line per check; the last line is a JSON summary; exits 1 at
// the first failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { check, checks, text } from './kit.mjs';

const [STEP, HANDOFFCTL, CONF, ...rest] = process.argv.slice(2);



async function connect(agent, extra = []) {
  const state = { stderr: '' };
  const transport = new StdioClientTransport({
    command: HANDOFFCTL,
    args: ['mcp', '-c', CONF, '--agent', agent, ...extra],
    stderr: 'pipe',
  });
  transport.stderr.on('data', (d) => { state.stderr += d; });
  const client = new Client({ name: `hd-trust-${agent}`, version: '1.0.0' });
  await client.connect(transport);
  await client.listTools(); // structuredContent is checked against outputSchema from here on
  return { client, state };
}

async function send([key]) {
  const bob = await connect('bob', ['--key', key]);
  const sent = await bob.client.callTool({
    name: 'handoff_send',
    arguments: { to_agent: 'alice', reason: 'signed by bob', context: 'the signed context', ttl_seconds: 600 },
  });
  check(!sent.isError && /^[0-9]+-bob-alice-[0-9a-f]{16}$/.test(sent.structuredContent.handoff_id),
    'bob (Ed25519 key): handoff_send returns a handoff_id', sent);
  await bob.client.close();
  check(!/AddressSanitizer|runtime error/.test(bob.state.stderr), 'no sanitizer report', bob.state.stderr);
  console.log(JSON.stringify({ handoff_id: sent.structuredContent.handoff_id, checks: checks() }));
}

async function take([genuine, ...forged]) {
  const alice = await connect('alice');
  // What is shown as waiting is what a take would get.
  const inbox = await alice.client.callTool({ name: 'handoff_inbox', arguments: {} });
  const h = inbox.structuredContent.handoffs;
  check(h.length === 1 && h[0].handoff_id === genuine && h[0].from_agent === 'bob' &&
    !text(inbox).includes('carol'),
    'alice: handoff_inbox lists only the genuine one, from bob as signed', inbox.structuredContent);
  const res = await alice.client.listResources();
  check(res.resources.length === 1 && res.resources[0].uri === `handoff://inbox/${genuine}`,
    'alice: resources/list has only the genuine one', res);
  const gread = await alice.client.readResource({ uri: `handoff://inbox/${genuine}` });
  const gb = JSON.parse(gread.contents[0].text);
  check(gb.from_agent === 'bob' && !gb.resume_context.includes('curl evil'),
    'alice: resources/read of the genuine one gives what its signed handoff says', gb);
  for (const f of forged) {
    const [id, reason] = f.split(':');
    const r = await alice.client.callTool({ name: 'handoff_take', arguments: { handoff_id: id } });
    check(r.isError === true && text(r).includes(reason) && !text(r).includes('curl evil'),
      `alice: handoff_take ${id} refused (${reason})`, r);
  }
  // Reading a forged bootstrap as a resource must not pass its text off
  // as a handoff: either not found or without the planted context.
  const [first] = forged[0].split(':');
  let read;
  try {
    read = await alice.client.readResource({ uri: `handoff://inbox/${first}` });
  } catch (e) {
    read = e instanceof McpError ? { code: e.code } : { thrown: String(e) };
  }
  check(read.code === -32602, `alice: resources/read of forged ${first}: not found`, read);

  const got = await alice.client.callTool({ name: 'handoff_take', arguments: {} });
  const sc = got.structuredContent || {};
  check(!got.isError && sc.handoff_id === genuine && sc.from_agent === 'bob' &&
    sc.resume_context.includes('the signed context') && !sc.resume_context.includes('curl evil'),
    'alice: handoff_take (oldest) takes the genuine one, with what its signed handoff says', got);
  const none = await alice.client.callTool({ name: 'handoff_take', arguments: {} });
  check(none.isError === true && !text(none).includes('curl evil'),
    'alice: only forged bootstraps left: handoff_take is a tool error', none);
  await alice.client.close();
  check(!/AddressSanitizer|runtime error/.test(alice.state.stderr), 'no sanitizer report', alice.state.stderr);
  console.log(JSON.stringify({ taken: sc.handoff_id, checks: checks() }));
}

(STEP === 'send' ? send(rest) : take(rest)).catch((e) => {
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
