"""Archive names stay within NAME_MAX whatever the (valid) names in a
handoff: a 64-character from_agent, a 128-character handoff_id and a long
to_agent made "{ts}-{from}-{to}-{id}.json" plus ".outcome" longer than 255
bytes, every look at the item failed with ENAMETOOLONG and a consumed
item stayed in claimed/ for ever.  Any holder of a sender key could do it.

- handoffs with such names (to agents of 43 and 64 characters; one posted
  through handoff-hubd) are delivered, consumed, and archived with their
  .outcome under the name an independent reference (below) computes:
  the whole name while it fits 239 characters, else from and to cut with
  8 hex characters of the BLAKE2b-128 of the whole stem, the id whole;
- the "~N" names too: with that name taken by another file, the item is
  archived as "...~1.json" and the other file is left as it was;
- handoffctl wait (started before the take) returns "consumed", show and
  list report each item consumed, the hub's GET reports it to the sender;
- relayed: an item with such names relayed through a real nats-server is
  archived as relayed on the origin host under its bounded name, and
  delivered on the other host."""

import hashlib
import json
import os
import secrets
import subprocess
import sys
from datetime import datetime

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import hubkit  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check, HANDOFFCTL  # noqa: E402

ARCHIVE_NAME_MAX = 239     # NAME_MAX - len(".outcome") - the temp name's 8
FROM = "sender-" + "s" * 57                 # 64 characters
TO43 = "taker43-" + "t" * 35                # 43
TO64 = "taker64-" + "t" * 56                # 64


def long_id(tag):
    """A valid handoff_id of 128 characters."""
    head = f"{tag}-"
    return head + secrets.token_hex(64)[:128 - len(head)]


def id_names_agents(hid, frm, to):
    digits = len(hid) - len(hid.lstrip("0123456789"))
    rest = hid[digits:]
    if digits and rest.startswith(f"-{frm}-{to}-"):
        return True
    return hid.startswith(f"{frm}-{to}-")


def archive_name(ts, frm, to, hid, n=0):
    """The archive name, as handoffd(8) ARCHIVE NAMES describes it."""
    tilde = f"~{n}" if n else ""
    stem = f"{ts}-{hid}" if id_names_agents(hid, frm, to) else f"{ts}-{frm}-{to}-{hid}"
    if len(stem) + len(tilde) + 5 <= ARCHIVE_NAME_MAX:
        return f"{stem}{tilde}.json"
    h = hashlib.blake2b(stem.encode(), digest_size=16).hexdigest()[:8]
    avail = ARCHIVE_NAME_MAX - (len(str(ts)) + 4 + 8 + len(hid) + len(tilde) + 5)
    if len(frm) <= avail // 2:
        kf = len(frm)
    elif len(to) <= avail - avail // 2:
        kf = min(avail - len(to), len(frm))
    else:
        kf = avail // 2
    kt = min(avail - kf, len(to))
    return f"{ts}-{frm[:kf]}-{to[:kt]}-{h}-{hid}{tilde}.json"


def unix(iso):
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def archived_as(env, hid):
    """The name in archive/ of the item hid (its record says so)."""
    for n in env.items("archive"):
        try:
            with open(env.path("archive", n)) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("handoff_id") == hid:
            return n
    return None


def check_archived(env, hid, want, what):
    name = archived_as(env, hid)
    check(name == want, f"{what}: archived as {name!r}, the reference says {want!r}")
    check(len(name) <= ARCHIVE_NAME_MAX and len(name + ".outcome") <= 255,
          f"{what}: {len(name)} characters")
    with open(env.path("archive", name + ".outcome")) as f:
        side = json.load(f)
    check(side["outcome"] == "consumed" and side["handoff_id"] == hid and side["from_agent"] == FROM,
          f"{what}: .outcome {side}")
    print(f"ok: {what}: archived consumed as {name} ({len(name)} characters)")


def deliver(env, k, doc, to, hub=None):
    if hub:
        st, ans = hub.post(doc, FROM)
        check(st == 200 and ans.get("handoff_id") == doc["handoff_id"], f"hub POST: {st} {ans}")
    else:
        hdproto.drop(env.spool, doc)
    boot = os.path.join(env.state[to], "handoffs", doc["handoff_id"] + ".json")
    hdtest.wait_for(lambda: os.path.exists(boot), 10, f"{k} delivered to {to}")
    with open(env.path("claimed", doc["handoff_id"] + ".json")) as f:
        return unix(json.load(f)["accepted_at"])


def consume(env, conf, k, hid, to):
    env.ctl("consume", "-c", conf, "--agent", to, hid, check_rc=0)
    hdtest.wait_for(lambda: env.item(hid)["state"] == "archive", 10,
                    f"{k} archived (claimed/ holds {env.names('claimed')})")


def local(env):
    hub = hubkit.Hub(env, tokens={FROM: None})
    conf = hub.conf
    env.start(conf=conf)
    hub.start()
    docs = {
        "h1": hdproto.build(FROM, TO43, env.key, ttl=600, handoff_id=long_id("to43")),
        "h2": hdproto.build(FROM, TO64, env.key, ttl=600, handoff_id=long_id("to64")),
        "h3": hdproto.build(FROM, TO64, env.key, ttl=600, handoff_id=long_id("taken")),
    }
    ids = {k: d["handoff_id"] for k, d in docs.items()}
    to = {"h1": TO43, "h2": TO64, "h3": TO64}
    acc = {}

    # h1: to 43 characters, followed by handoffctl wait from before the take
    acc["h1"] = deliver(env, "h1", docs["h1"], TO43)
    w = subprocess.Popen([HANDOFFCTL, "wait", "-c", conf, ids["h1"], "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hdtest.wait_watching(w, what="handoffctl wait")
    consume(env, conf, "h1", ids["h1"], TO43)
    check_archived(env, ids["h1"], archive_name(acc["h1"], FROM, TO43, ids["h1"]), "to 43 characters")
    out, err = w.communicate(timeout=20 * hdtest.SLOW)
    j = json.loads(out) if out.strip() else {}
    check(w.returncode == 0 and j.get("status") == "consumed" and j.get("handoff_id") == ids["h1"],
          f"handoffctl wait: exit {w.returncode}: {out!r} {err!r}")
    print("ok: handoffctl wait (started before the take) -> consumed")

    # h2: to 64 characters, through the hub; h3: its archive name taken
    # by another file first
    acc["h2"] = deliver(env, "h2", docs["h2"], TO64, hub=hub)
    acc["h3"] = deliver(env, "h3", docs["h3"], TO64)
    taken = archive_name(acc["h3"], FROM, TO64, ids["h3"])
    other = b'{"note":"another file under this name"}\n'
    with open(env.path("archive", taken), "wb") as f:
        f.write(other)
    consume(env, conf, "h2", ids["h2"], TO64)
    consume(env, conf, "h3", ids["h3"], TO64)
    check(env.names("claimed") == [], f"left in claimed/: {env.names('claimed')}")
    check_archived(env, ids["h2"], archive_name(acc["h2"], FROM, TO64, ids["h2"]), "to 64 characters")
    check_archived(env, ids["h3"], archive_name(acc["h3"], FROM, TO64, ids["h3"], 1), "its name taken")
    with open(env.path("archive", taken), "rb") as f:
        check(f.read() == other, "the file under the taken name was changed")
    check(not os.path.exists(env.path("archive", taken + ".outcome")),
          "the file under the taken name got an .outcome")
    print("ok: the file under the taken name is as it was, without an .outcome")

    for k in docs:
        p = env.ctl("show", "-c", conf, ids[k], "--json", check_rc=0)
        j = json.loads(p.stdout)
        check(j.get("status") == "consumed" and j.get("state") == "archive" and
              j.get("from_agent") == FROM and j.get("to_agent") == to[k],
              f"show {k}: {p.stdout}")
        p = env.ctl("wait", "-c", conf, ids[k], "--timeout", "0")
        check(p.returncode == 0 and p.stdout.strip() == f"{ids[k]} consumed",
              f"wait {k} after the end: {p.returncode} {p.stdout!r} {p.stderr!r}")
    print("ok: handoffctl show and wait --timeout 0 report the 3 consumed")
    p = env.ctl("list", "-c", conf, "--state", "archive", "--json", check_rc=0)
    listed = {it.get("handoff_id"): it for it in json.loads(p.stdout)}
    for k in docs:
        check(listed.get(ids[k], {}).get("outcome") == "consumed", f"list: {k}: {listed.get(ids[k])}")
    print(f"ok: handoffctl list --state archive lists the 3 consumed ({len(listed)} items listed)")

    st, item = hub.get(f"/api/v1/handoffs/{ids['h2']}", FROM)
    check(st == 200 and item.get("status") == "consumed", f"hub GET: {st} {item}")
    print("ok: the hub's GET reports the one it took consumed")


def relayed():
    import relaykit
    if not natsrv.available():
        hdtest.skip_part("nats-server", "the relay part")
        return
    with relaykit.Hosts(b_agents=[TO43, TO64]) as h:
        h.start_b()
        h.start_a()
        docs = [hdproto.build(FROM, to, h.a.key, ttl=600, handoff_id=long_id(f"relay{len(to)}"))
                for to in (TO43, TO64)]
        for doc in docs:
            hdproto.drop(h.a.spool, doc)
        h.wait_delivered([d["handoff_id"] for d in docs], timeout=60)
        rel = h.relayed_on_a()
        for doc in docs:
            hid, to = doc["handoff_id"], doc["to_agent"]
            check(hid in rel, f"not archived as relayed on a: {h.a.names('archive')}")
            name = archived_as(h.a, hid)
            ts = int(name.split("-", 1)[0])
            check(name == archive_name(ts, FROM, to, hid),
                  f"relayed: archived as {name!r}, the reference says {archive_name(ts, FROM, to, hid)!r}")
            print(f"ok: relayed to {len(to)} characters through nats-server, delivered on b, "
                  f"archived on a as {name} ({len(name)} characters)")
        check(h.a.count("outbox") == 0, "a's outbox/ is empty")


def main():
    with hdtest.Env(agents=[TO43, TO64]) as env:
        local(env)
    relayed()


hdtest.run(main)
