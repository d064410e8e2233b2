"""A receipt that the origin cannot check because its own disk fails is
not lost: two real handoffds and a real nats-server, receipts on; a's
[relay] host_pubkey_dir (b.pub in it) lies on a powercutfs.

- The power of that file system goes (every read answers EIO) before b's
  "delivered" receipt of a relayed handoff reaches a: a cannot load b's
  key, logs that the receipt comes again and leaves it unacked; it does
  not drop it as "no usable key" (a drop is acked and never sent again),
  and counts no drop.
- a stopped, the file system mounted again, a started: the receipt comes
  again and is applied (remote_outcome "delivered" beside the archived
  item)."""

import os
import shutil
import sys

SRC = os.environ.get("HD_SRC", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
sys.path.insert(0, os.path.join(SRC, "tests", "powercut"))
import hdtest  # noqa: E402
import pcfs  # noqa: E402
import relaykit  # noqa: E402
from hdtest import check  # noqa: E402


def main():
    relaykit.skip_without_nats()
    why = pcfs.unusable()
    if why:
        hdtest.skip(*why)
    with relaykit.Hosts() as h:
        h.enable_receipts()
        h.consumer.stop()               # b delivers; nothing consumes
        conf = h.receipt_conf["a"]
        i = next(k for k, line in enumerate(conf) if line.startswith("host_pubkey_dir = "))
        disk, mnt = os.path.join(h.a.dir, "keydisk"), os.path.join(h.a.dir, "keymnt")
        shutil.copytree(conf[i].split(" = ", 1)[1], os.path.join(disk, "hostkeys"))
        os.chmod(disk, 0o755)
        fs = pcfs.Mount(disk, mnt)
        try:
            conf[i] = f"host_pubkey_dir = {os.path.join(mnt, 'hostkeys')}"
            a, b = h.start_a(), h.start_b()
            relaykit.wait_ready(a, b)

            fs.cut()
            check(fs.is_cut(), "the key's file system answers EIO")
            [hid] = h.drop(1, agents=["alice"])
            said = f"cannot take in the receipt for {hid} now"
            hdtest.wait_for(lambda: said in a.logs() or "dropped a receipt" in a.logs(), 60,
                            lambda: f"a to meet b's receipt for {hid}:\n{a.logs()[-2000:]}")
            logs = a.logs()
            check("dropped a receipt" not in logs,
                  f"a dropped the receipt its disk could not check:\n{logs[-2000:]}")
            check("Input/output error" in logs.split(said, 1)[1].split("\n", 1)[0],
                  f"the log line says why: {logs[-1000:]}")
            st = relaykit.receipt_status(a)
            check(st.get("dropped") == 0 and st.get("applied") == 0, f"a's receipts: {st}")
            print(f"ok: key file unreadable (EIO): the receipt for {hid} not dropped, not acked")

            check(a.stop() == 0, "a stops")
            fs.unmount()
            fs = pcfs.Mount(disk, mnt)
            a = h.start_a(name="a2")
            hdtest.wait_for(lambda: (h.relayed_on_a().get(hid) or {}).get("remote_outcome") ==
                            "delivered", 60,
                            lambda: f"the receipt applied after the restart: "
                            f"{h.relayed_on_a().get(hid)}, {relaykit.receipt_status(a)}")
            st = relaykit.receipt_status(a)
            check(st.get("dropped") == 0 and st.get("applied", 0) >= 1, f"a's receipts: {st}")
            print(f"ok: a started again with the key readable: the receipt came again and was applied")
            check(a.stop() == 0 and b.stop() == 0, "both stop")
        finally:
            fs.unmount()
    hdtest.finish("a receipt the origin's disk could not check comes again and is applied")


hdtest.run(main)
