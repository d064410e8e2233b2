"""handoffctl mcp with the official MCP TypeScript SDK as the client
(tests/mcp/client.mjs: Client + StdioClientTransport of
@modelcontextprotocol/sdk, the version pinned in tests/mcp/package.json and
its lock file; `make check` runs `npm ci` there).  A real handoffd on a
temp spool serves alice and bob; the script sends from bob's server to
alice's, sees list_changed there, takes it, sees consumed on bob's, alice
reports its result (handoff_complete) and bob's handoff_status has it, and
walks every error path.  Here: the spool says the same afterwards (the
result beside the archived item), and the refused sends left nothing
behind.

Skipped (and says so) only when node or the SDK cannot be had: a package
build without network."""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check, HANDOFFCTL, SRC  # noqa: E402

MCP_DIR = os.path.join(SRC, "tests", "mcp")
SDK = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk", "package.json")


def main():
    node = shutil.which("node")
    if not node:
        hdtest.skip("nodejs", "node is not installed")
    if not os.path.exists(SDK):
        hdtest.skip("npm", "no " + SDK + ' (npm ci in tests/mcp failed?)')
    pinned = json.load(open(os.path.join(MCP_DIR, "package.json")))["dependencies"]["@modelcontextprotocol/sdk"]
    have = json.load(open(SDK))["version"]
    check(have == pinned, f"installed SDK {have} is the pinned {pinned} (run npm ci in tests/mcp)")

    with hdtest.Env(agents=["alice", "bob"]) as env:
        conf = env.write_config("d0")
        d = env.start(conf=conf)
        p = subprocess.run([node, os.path.join(MCP_DIR, "client.mjs"), HANDOFFCTL, conf,
                            os.path.join(SRC, "tests", "payloads", "vox.json")],
                           capture_output=True, text=True, timeout=300 * hdtest.SLOW,
                           env=dict(os.environ, HD_SLOW=str(hdtest.SLOW)), cwd=MCP_DIR)
        sys.stdout.write(p.stdout)
        check(p.returncode == 0, f"client.mjs exited {p.returncode}:\n{p.stderr[-4000:]}")
        summary = json.loads(p.stdout.strip().splitlines()[-1])
        hid = summary["handoff_id"]

        # The spool agrees with what the servers said.
        archived = [n for n in env.items("archive") if n.endswith(f"-{hid}.json")]
        check(len(archived) == 1, f"one archived item for {hid}: {env.names('archive')}")
        outcome = json.load(open(env.path("archive", archived[0] + ".outcome")))
        check(outcome["outcome"] == "consumed", f"archived as consumed: {outcome}")
        result = json.load(open(env.path("archive", archived[0] + ".result")))
        check(result["status"] == "completed" and result["agent"] == "alice"
              and result["result"]["data"]["tests"] == {"passed": 41, "failed": 0},
              f"alice's result beside it: {result}")
        check(env.bootstraps("alice") == [], f"no bootstrap left: {env.bootstraps('alice')}")
        # Every refused handoff_send was refused before it reached the spool.
        check(env.count("archive") == 1 and env.count("handoff") == 0 and env.count("rejected") == 0
              and env.count("claimed") == 0,
              f"nothing else in the spool: {[(s, env.names(s)) for s in ('handoff', 'claimed', 'archive', 'rejected')]}")
        d.stop()
        print(f"SDK {have}: {summary['checks']} checks passed; alice saw "
              f"{summary['alice_list_changed']} list_changed notifications, the first "
              f"{summary['send_to_list_changed_ms']} ms after bob's handoff_send")
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
