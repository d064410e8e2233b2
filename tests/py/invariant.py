"""The spool invariant (issue 7), checked from the outside: stdlib only, no
handoffd code involved.

    import invariant
    snap = invariant.snapshot(sentinel_dir)           # before
    ...
    v = invariant.check(spool, {"alice": ".../agents/alice"}, submitted_ids,
                        consumed=ids_the_consumers_got, settled=True,
                        sentinels={sentinel_dir: snap})
    assert v == [], v

What is checked (each failure is one string in the returned list):

- every submitted handoff_id is in exactly one of handoff/ claimed/
  archive/ rejected/ (files are mapped to ids by reading them; archive and
  rejected sidecars name the id when the item itself cannot be parsed);
  an item never sits in two places, nor twice in one;
- every claimed id has exactly one bootstrap (in its to_agent's
  handoffs/ dir, nowhere else), or was consumed (settled=True: a consumed
  item must have been archived by now, and a claimed item must have its
  bootstrap);
- no bootstrap without a claimed or archived item, and none for an item
  that has already been archived (the agent could take it again);
- an item archived as "consumed" was really taken by a consumer (when the
  caller passes consumed=): otherwise the daemon acknowledged a delivery
  that never happened, i.e. the handoff is lost;
- a claimed item is the daemon's record (issue 25): the bootstrap it
  wrote, "handoff" inside it; a record with neither its bootstrap, nor
  its hidden .pending. name, nor a consumer that got it is an
  acknowledged handoff lost (an earlier version's .delivered marker
  counts as a record);
- no sidecar (.outcome, .result, .reason, .delivered) without its item;
- settled=True (after a clean restart / READY=1, nothing in flight): no
  temp files, i.e. no dot-names in claimed/ archive/ rejected/ ids/ baton/
  or the agents' handoffs/ dirs other than consumers' ".consume.*";
- sentinels={dir: snapshot(dir)}: nothing inside those trees was created,
  removed or changed (type, mode, owner, size, mtime, link count, bytes).

CLI for manual use:

    python3 tests/py/invariant.py --spool DIR --agent alice=STATE_DIR ... \
        [--ids FILE] [--settled]
"""

import hashlib
import json
import os
import stat
import sys

ITEM_DIRS = ("handoff", "claimed", "archive", "rejected")
SIDECAR = {"claimed": ".delivered", "archive": ".outcome", "rejected": ".reason"}
RESULT_SIDECAR = ".result"
# In an agent's handoffs/: its result for the daemon, the daemon's refusal.
AGENT_FILES = (".consume.", ".result.", ".refused.")
TEMP_CHECKED = ("claimed", "archive", "rejected", "ids", "baton")


def _load(path):
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
        doc = json.loads(data)
        return doc if isinstance(doc, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _id_of(doc):
    if not doc:
        return None
    v = doc.get("handoff_id")
    return v if isinstance(v, str) else None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_regular(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def published(handoffs_dir):
    """The names of the bootstraps published in an agent's handoffs/ dir
    (no hidden or temp names), sorted; [] when there is no such dir."""
    return [n for n in _listdir(handoffs_dir) if n.endswith(".json") and not n.startswith(".")]


def bootstrap_name(handoff_id):
    """The real consumer's file name for a handoff_id."""
    safe = "".join(c for c in handoff_id if c.isalnum() or c in "-_") or "handoff"
    return safe + ".json"


def record_handoff(doc):
    """The handoff a document holds: a record's (the daemon's file in
    claimed/ and archive/: the bootstrap, with the handoff as signed under
    "handoff"), or the document itself (a file in handoff/ or rejected/,
    an earlier version's claimed item)."""
    if isinstance(doc, dict) and isinstance(doc.get("handoff"), dict) and \
            isinstance(doc.get("accepted_at"), str) and doc.get("source") == "voice_handoff":
        return doc["handoff"]
    return doc


def item_state(spool, state_dirs, hid):
    """The one place the tests read an item's state from the files (the
    next layout change touches this function).  Returns a dict:
        state:     "handoff", "claimed", "archive", "rejected" or None
                   (the first directory holding the id; "duplicated"
                   names every place when there are several)
        path:      the item's file there
        record:    True when it is the daemon's record (a bootstrap)
        handoff:   the handoff it holds (record_handoff), or None
        agent:     to_agent
        bootstrap: the published bootstrap's path in the agent's
                   handoffs/, or None
        hidden:    ".pending.", ".expire." or ".cancel." when the agent's handoffs/
                   holds the bootstrap under that hidden name, else None
        linked:    True when the record and the bootstrap are one file
        outcome:   an archived item's outcome, a rejected one's reason
    """
    s = scan(spool, state_dirs)
    where = s["items"].get(hid, [])
    res = {"state": None, "path": None, "record": False, "handoff": None,
           "agent": s["to_agent"].get(hid), "bootstrap": None, "hidden": None,
           "linked": False, "outcome": None, "duplicated": where if len(where) > 1 else None}
    if where:
        state, name = where[0]
        p = os.path.join(spool, state, name)
        doc = _load(p)
        res.update(state=state, path=p, handoff=record_handoff(doc),
                   record=doc is not None and record_handoff(doc) is not doc)
        side = SIDECAR.get(state)
        sc = _load(p + side) if side and state != "claimed" else None
        if sc:
            res["outcome"] = sc.get("outcome") or sc.get("reason")
    b = bootstrap_name(hid)
    for agent, sd in state_dirs.items():
        hd = os.path.join(sd, "handoffs")
        if os.path.exists(os.path.join(hd, b)):
            res["bootstrap"] = os.path.join(hd, b)
        for pre in (".pending.", ".expire.", ".cancel."):
            if os.path.exists(os.path.join(hd, pre + b)):
                res["hidden"] = pre
    try:
        if res["path"] and res["bootstrap"]:
            res["linked"] = os.path.samefile(res["path"], res["bootstrap"])
    except OSError:
        pass
    return res


def scan(spool, state_dirs, cache=None, extra_dirs=()):
    """Where everything is (cache: a dict kept by the caller between calls,
    so that archive/ and rejected/ items, which never change, are read once;
    extra_dirs: more item dirs, e.g. ("outbox",) on a relay's sending host,
    whose dot-names are temps and whose items are named ID.json).
    Returns a dict:
        items:      id -> [(state, name), ...]   (every place the id is)
        unknown:    [(state, name)]              items whose id is unknown
        to_agent:   id -> to_agent (from the item)
        outcome:    id -> archive outcome
        reason:     rejected/ name -> the reason its .reason sidecar gives
        orphans:    [(state, sidecar name)]      sidecars without their item
        temps:      [path]                       dot-names in daemon-owned dirs
        bootstraps: id -> [(agent, name)]
        boot_noid:  [(agent, name)]              bootstraps without a readable id
        hidden:     id -> [(agent, name)]        .pending./.expire./.cancel. bootstraps
        records:    set of ids whose claimed/ item is the daemon's record
    """
    res = {"items": {}, "unknown": [], "to_agent": {}, "outcome": {}, "reason": {}, "orphans": [],
           "temps": [], "bootstraps": {}, "boot_noid": [], "hidden": {}, "records": set()}
    for state in ITEM_DIRS + tuple(extra_dirs):
        d = os.path.join(spool, state)
        names = _listdir(d)
        present = set(names)
        side = SIDECAR.get(state)
        for n in names:
            p = os.path.join(d, n)
            if n.startswith("."):
                if state in TEMP_CHECKED or state in extra_dirs:
                    res["temps"].append(p)
                continue
            # archive/'s second sidecar: an agent's result (handoffctl complete)
            if state == "archive" and n.endswith(RESULT_SIDECAR):
                if n[:-len(RESULT_SIDECAR)] not in present:
                    res["orphans"].append((state, n))
                continue
            if side and n.endswith(side):
                if n[:-len(side)] not in present:
                    # claimed/<id>.delivered belongs to claimed/<id>.json
                    base = n[:-len(side)]
                    if not (state == "claimed" and base + ".json" in present):
                        res["orphans"].append((state, n))
                continue
            if cache is not None and state in ("archive", "rejected") and p in cache:
                hid, to, oc = cache[p]
                res["items"].setdefault(hid, []).append((state, n))
                if to is not None:
                    res["to_agent"][hid] = to
                if state == "archive":
                    res["outcome"][hid] = oc
                else:
                    res["reason"][n] = oc
                continue
            doc = _load(p) if _is_regular(p) else None
            hid = _id_of(doc)
            sc = _load(p + side) if side else None
            if (state == "claimed" or state in extra_dirs) and n.endswith(".json"):
                hid = hid or n[:-5]
            if state == "claimed" and n.endswith(".json"):
                if doc is not None and record_handoff(doc) is not doc:
                    res["records"].add(hid)
            if hid is None:
                hid = _id_of(sc)
            if state == "archive" and sc:
                res["outcome"][hid] = sc.get("outcome")
            if state == "rejected":
                res["reason"][n] = sc.get("reason") if sc else None
            if hid is None:
                res["unknown"].append((state, n))
                continue
            res["items"].setdefault(hid, []).append((state, n))
            to = doc.get("to_agent") if doc and isinstance(doc.get("to_agent"), str) else None
            if to is not None:
                res["to_agent"][hid] = to
            if cache is not None and state in ("archive", "rejected") and sc:
                # Final once there: the sidecar is written before the move.
                cache[p] = (hid, to, sc.get("outcome" if state == "archive" else "reason"))
    for state in ("ids", "baton"):
        for n in _listdir(os.path.join(spool, state)):
            if n.startswith("."):
                res["temps"].append(os.path.join(spool, state, n))
    for agent, sd in state_dirs.items():
        hd = os.path.join(sd, "handoffs")
        for n in _listdir(hd):
            p = os.path.join(hd, n)
            if n.startswith("."):
                if not n.startswith(AGENT_FILES):
                    res["temps"].append(p)
                for pre in (".pending.", ".expire.", ".cancel."):
                    if n.startswith(pre):
                        hid = _id_of(_load(p))
                        if hid is not None:
                            res["hidden"].setdefault(hid, []).append((agent, n))
                continue
            hid = _id_of(_load(p))
            if hid is None:
                res["boot_noid"].append((agent, n))
            else:
                res["bootstraps"].setdefault(hid, []).append((agent, n))
    return res


def _stat_entry(path):
    st = os.lstat(path)
    e = {"type": stat.S_IFMT(st.st_mode), "mode": stat.S_IMODE(st.st_mode),
         "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink}
    if stat.S_ISREG(st.st_mode):
        e["size"] = st.st_size
        e["mtime"] = st.st_mtime_ns
        try:
            # O_NONBLOCK, no follow: never hang on anything odd.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                e["sha256"] = hashlib.sha256(f.read()).hexdigest()
        except OSError as ex:
            e["sha256"] = f"unreadable: {ex.strerror}"
    elif stat.S_ISLNK(st.st_mode):
        e["target"] = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        e["mtime"] = st.st_mtime_ns
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        e["rdev"] = st.st_rdev
    return e


def snapshot(root, exclude=()):
    """Every entry under root (not following symlinks) with its metadata
    and content hash.  exclude: absolute paths whose subtrees are skipped."""
    root = os.path.abspath(root)
    excl = {os.path.abspath(x) for x in exclude}
    snap = {}
    if not os.path.lexists(root):
        return snap
    snap["."] = _stat_entry(root)
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for dn in dirnames:
            p = os.path.join(dirpath, dn)
            if p in excl:
                continue
            keep.append(dn)
        dirnames[:] = keep
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if p in excl:
                continue
            try:
                snap[os.path.relpath(p, root)] = _stat_entry(p)
            except FileNotFoundError:
                pass
    if excl:
        # A directory's mtime changes when an excluded child changes.
        for rel, e in snap.items():
            p = os.path.normpath(os.path.join(root, rel))
            if any(os.path.dirname(x) == p for x in excl):
                e.pop("mtime", None)
    return snap


def compare(root, before, exclude=()):
    """Differences between a snapshot and the tree now."""
    after = snapshot(root, exclude)
    if exclude:
        for rel, e in before.items():
            if "mtime" not in e and rel in after:
                after[rel].pop("mtime", None)
    out = []
    for rel in sorted(set(before) | set(after)):
        b, a = before.get(rel), after.get(rel)
        p = os.path.normpath(os.path.join(root, rel))
        if b is None:
            out.append(f"outside: {p} was created ({a})")
        elif a is None:
            out.append(f"outside: {p} was removed (was {b})")
        elif a != b:
            diff = {k: (b.get(k), a.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
            out.append(f"outside: {p} changed: {diff}")
    return out


def check(spool, state_dirs, submitted, consumed=None, settled=False, sentinels=None,
          allow_states=None, cache=None, rejecting=False, extra_dirs=(), reject_ok=None):
    """The invariant; returns a list of violations (empty = holds).

    spool: spool dir; state_dirs: {agent: state_dir}; submitted: handoff_ids
    that producers have put into handoff/ (completed renames); consumed:
    ids consumers took (a set, or a dict/Counter id -> times), or None when
    unknown; settled: nothing in flight (after READY=1 of a fresh start with
    producers and consumers paused, or after everything drained);
    sentinels: {root: snapshot(root)} or {root: (snapshot, exclude)};
    allow_states: the states a submitted id may legitimately be in (default:
    every item dir); cache, extra_dirs: see scan(); reject_ok: None, or the
    reasons a submitted id may be rejected for (an acknowledged handoff
    rejected for anything else is lost: "rejected, acknowledged"); rejecting: a rejection may be in flight (the daemon
    writes rejected/NAME.reason before it moves NAME in, and a fault may
    make it try again and again), so a .reason alone in rejected/ is not
    a violation (never with settled)."""
    v = []
    dirs = ITEM_DIRS + tuple(extra_dirs)
    allow_states = dirs if allow_states is None else allow_states
    s = scan(spool, state_dirs, cache, extra_dirs)
    items, boots = s["items"], s["bootstraps"]
    cons = set(consumed) if consumed is not None else None

    for hid in submitted:
        where = items.get(hid, [])
        if not where:
            v.append(f"lost: {hid} is in none of {'/ '.join(dirs)}/")
        elif len(where) > 1:
            v.append(f"duplicated: {hid} is in {len(where)} places: {where}")
        elif where[0][0] not in allow_states:
            v.append(f"unexpected state: {hid} is in {where[0][0]}/{where[0][1]}")
        for state, name in where if reject_ok is not None else ():
            r = s["reason"].get(name)
            if state == "rejected" and r not in reject_ok:
                v.append(f"rejected, acknowledged: {hid} ({r})")
    sub = set(submitted)
    for hid, where in items.items():
        if len(where) > 1 and hid not in sub:
            v.append(f"duplicated: {hid} (not submitted by this run) is in {where}")

    for hid, where in items.items():
        states = {w[0] for w in where}
        b = boots.get(hid, [])
        if "claimed" in states:
            to = s["to_agent"].get(hid)
            if len(b) > 1:
                v.append(f"duplicate bootstraps: {hid}: {b}")
            if to is not None and any(a != to for a, _ in b):
                v.append(f"misdelivered: {hid} is for {to}, bootstrap in {b}")
            acked = hid in s["records"] or \
                os.path.exists(os.path.join(spool, "claimed", hid + ".delivered"))
            if not b and cons is not None and hid not in cons and acked and \
                    not s["hidden"].get(hid):
                v.append(f"acknowledged, not on disk: {hid} has a record in claimed/, "
                         "but no bootstrap (published or hidden) and no consumer got it")
            if not b:
                if settled:
                    if cons is not None and hid in cons:
                        v.append(f"consumed but not archived: {hid} still in claimed/")
                    elif to in state_dirs:
                        v.append(f"claimed without bootstrap: {hid} (nobody consumed it)")
                elif cons is not None and hid not in cons and to in state_dirs:
                    # Allowed only in flight: the daemon may be between the
                    # claim and the bootstrap write.
                    pass
        if "archive" in states:
            if b:
                v.append(f"bootstrap for an archived item: {hid}: {b}")
            oc = s["outcome"].get(hid)
            if oc is None:
                v.append(f"archived without outcome: {hid}")
            if cons is not None:
                if oc == "consumed" and hid not in cons:
                    v.append(f"lost: {hid} archived as consumed but no consumer got it")
                if oc in ("expired", "canceled") and hid in cons:
                    v.append(f"double end: {hid} consumed and archived as {oc}")

    for hid, b in boots.items():
        states = {w[0] for w in items.get(hid, [])}
        if not states & {"claimed", "archive"}:
            v.append(f"bootstrap without claimed or archived item: {hid}: {b}")
    for agent, n in s["boot_noid"]:
        v.append(f"unreadable bootstrap: {agent}/handoffs/{n}")
    for state, n in s["orphans"]:
        if rejecting and not settled and state == "rejected" and n.endswith(".reason"):
            continue
        v.append(f"sidecar without item: {state}/{n}")
    if settled:
        for p in s["temps"]:
            v.append(f"temp file after restart: {p}")
    for root, snap in (sentinels or {}).items():
        exclude = ()
        if isinstance(snap, tuple):
            snap, exclude = snap
        v.extend(compare(root, snap, exclude))
    return v


def summary(spool, state_dirs):
    """Counts per state, for figures."""
    s = scan(spool, state_dirs)
    out = {st: 0 for st in ITEM_DIRS}
    for where in s["items"].values():
        for st, _ in where:
            out[st] += 1
    out["unknown"] = len(s["unknown"])
    out["bootstraps"] = sum(len(b) for b in s["bootstraps"].values())
    out["temps"] = len(s["temps"])
    return out


# ---- the real consumer the harnesses run -----------------------------------

def real_consume(state_dir, handoff_id, resume_window=300, now=None):
    """The real consumer (gptme-voice's _consume_handoff_bootstrap): read the
    bootstrap, require protocol_version 1, source voice_handoff and a
    resume_context that str.strip() leaves non-empty ("empty
    resume_context" otherwise), accepted_at within the resume window, then
    unlink.  Returns the bootstrap dict or None.  Tolerates a racing
    consumer (ENOENT on read or unlink = somebody else got it).  The one
    copy the tests use (hdtest.real_consumer is this)."""
    from datetime import datetime, timezone
    path = os.path.join(state_dir, "handoffs", bootstrap_name(handoff_id))
    try:
        with open(path) as f:
            payload = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    if payload.get("protocol_version") != 1 or payload.get("source") != "voice_handoff":
        return None
    ctx = str(payload.get("resume_context") or "").strip()
    acc = payload.get("accepted_at")
    if not ctx or not isinstance(acc, str):
        return None
    try:
        at = datetime.fromisoformat(acc.replace("Z", "+00:00"))
    except ValueError:
        return None
    if ((now or datetime.now(timezone.utc)) - at).total_seconds() > resume_window:
        return None
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None     # another reader was faster: read-then-unlink races
    return payload


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="Check the handoffd spool invariant.")
    ap.add_argument("--spool", required=True)
    ap.add_argument("--agent", action="append", default=[], metavar="NAME=STATE_DIR")
    ap.add_argument("--ids", help="file with submitted handoff_ids, one a line "
                    "(default: every id found in the spool)")
    ap.add_argument("--consumed", help="file with consumed handoff_ids, one a line")
    ap.add_argument("--settled", action="store_true",
                    help="nothing in flight: also check for temp files and undelivered claims")
    a = ap.parse_args(argv)
    agents = {}
    for x in a.agent:
        name, _, sd = x.partition("=")
        if not sd:
            ap.error(f"--agent {x}: want NAME=STATE_DIR")
        agents[name] = sd
    if a.ids:
        ids = [ln.strip() for ln in open(a.ids) if ln.strip()]
    else:
        ids = sorted(scan(a.spool, agents)["items"])
    cons = None
    if a.consumed:
        cons = {ln.strip() for ln in open(a.consumed) if ln.strip()}
    v = check(a.spool, agents, ids, consumed=cons, settled=a.settled)
    print(json.dumps(summary(a.spool, agents)))
    for x in v:
        print(x)
    print(f"{len(ids)} id(s), {len(v)} violation(s)")
    return 1 if v else 0


if __name__ == "__main__":
    sys.exit(main())
