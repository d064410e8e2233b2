// Shared by the SDK test clients (client.mjs, trust.mjs): a check that
// stops the client at the first failure and counts the others, and the
// text of a tool result.
let count = 0;

export function check(cond, what, extra) {
  if (!cond) {
    console.log(`FAIL: ${what}${extra === undefined ? '' : ': ' + JSON.stringify(extra)}`);
    process.exit(1);
  }
  count++;
  console.log(`ok: ${what}`);
}

export const checks = () => count;

export function text(result) {
  return (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}
