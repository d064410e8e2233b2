"""Layering: who may use whom under src/.

- #include "..." lines, resolved like the compiler does (the including
  file's directory first, then include/, src/lib, src/handoffd): a file and
  its header are one module (src/lib/payload.c + payload.h).  No two modules
  may include each other, directly or around a circle.  src/lib and include/
  may include only include/ and src/lib headers, never a program's.
- libhandoff's objects (nm over $HD_BUILD/src/lib/**/*.o): no two of them call
  each other around a circle either, also not through the public hd_ calls
  that one handoff.h declares for all.  The same for handoffd's objects
  (src/handoffd/*.o): daemon -> intake, delivery, lifecycle -> spool, so
  one handoff followed from on_inotify to its archive never returns into a
  file it has left.
- One name, one file: no two sources under src/ share a file name (each
  program's main.c aside), so a name says which part owns it and an
  #include "x.h" cannot mean two headers.
- A handoff is parsed once (issue 44): only handoff_doc.c spells a
  handoff's keys; only store/store_doc.c those of the daemon's sidecars,
  receipt.c a relay receipt's.  No other file of src/handoffd names
  "handoff_id", "from_agent", "to_agent", the times, "kid" or
  "payload_type".
- struct spool (src/handoffd/spool.h) holds the storage only: at most
  SPOOL_FIELDS_MAX members.  Each module's own state is in its own header
  and the daemon holds them side by side (parts.h).
- The checks themselves find a circle, a library file including a daemon
  header and a name used twice in a small made-up tree, so they can fail.
Prints what it checked.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("HD_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HD_BUILD") or os.path.join(SRC, "build")
sys.path.insert(0, os.path.join(SRC, "tests", "py"))
import hdtest  # noqa: E402
SEARCH = ["include", "src/lib", "src/lib/payload", "src/lib/private",
          "src/lib/config", "src/lib/spool", "src/lib/agent", "src/lib/mcp",
          "src/handoffd", "src/handoffd/store"]
LIBRARY = ("include/", "src/lib/")


INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
fail = hdtest.fail


def circles(edges):
    """The strongly connected components with more than one node (Tarjan,
    iterative: no recursion limit on a large tree)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                c = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    c.add(w)
                    if w == v:
                        break
                if len(c) > 1:
                    out.append(c)
    return out


def include_graph(root):
    """(edges between modules, [(file, header) a library file must not
    include], number of include lines)."""
    files = []
    for d, dirs, names in os.walk(os.path.join(root, "src")):
        dirs.sort()
        files += [os.path.relpath(os.path.join(d, f), root)
                  for f in sorted(names) if f.endswith((".c", ".h"))]
    files += [os.path.join("include", f)
              for f in sorted(os.listdir(os.path.join(root, "include")))
              if f.endswith(".h")] if os.path.isdir(os.path.join(root, "include")) else []
    edges, outside, count = {}, [], 0
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for h in INCLUDE.findall(text):
            count += 1
            for d in [os.path.dirname(f)] + SEARCH:
                p = os.path.normpath(os.path.join(d, h))
                if os.path.isfile(os.path.join(root, p)):
                    break
            else:
                continue        # not ours (none such today)
            if f.startswith(LIBRARY) and not p.startswith(LIBRARY):
                outside.append((f, p))
            a, b = os.path.splitext(f)[0], os.path.splitext(p)[0]
            if a != b:
                edges.setdefault(a, set()).add(b)
    return edges, outside, count


def check_includes():
    edges, outside, count = include_graph(SRC)
    print(f"include lines read: {count}, module edges: "
          f"{sum(len(v) for v in edges.values())}")
    for f, p in outside:
        fail(f"{f} includes {p}: the library uses only include/ and src/lib")
    for c in circles(edges):
        fail(f"include circle: {' '.join(sorted(c))}")
    lib = {k: v for k, v in edges.items() if k.startswith(LIBRARY)}
    print(f"library modules that include another's header: {len(lib)}, "
          f"include circles among them: {len(circles(lib))}")


def shared_names(root):
    """{file name: [its paths]} for each name that two sources under src/
    use, main.c aside: each program has its own."""
    where = {}
    for d, dirs, names in os.walk(os.path.join(root, "src")):
        dirs.sort()
        for f in sorted(names):
            if f.endswith((".c", ".h")) and f != "main.c":
                where.setdefault(f, []).append(
                    os.path.relpath(os.path.join(d, f), root))
    return {f: p for f, p in where.items() if len(p) > 1}


def check_names():
    twice = shared_names(SRC)
    print(f"source file names used by two parts: {len(twice)}")
    for f, paths in sorted(twice.items()):
        fail(f"{' and '.join(paths)} share the name {f}: name each for "
             "what it owns")


def check_symbols(sub="lib", what="libhandoff"):
    # Only objects of sources that exist: a stale one left in the build
    # dir would define the same names twice.
    # (src/lib's subfolders, payload/ and private/, are the library too)
    objs = sorted(os.path.relpath(os.path.join(d, f), os.path.join(BUILD, "src", sub))
                  for d, _, names in os.walk(os.path.join(BUILD, "src", sub)) for f in names
                  if f.endswith(".o") and
                  os.path.isfile(os.path.join(SRC, "src", sub,
                                              os.path.relpath(d, os.path.join(BUILD, "src", sub)),
                                              f[:-2] + ".c")))
    if not objs:
        fail(f"no objects in {BUILD}/src/{sub}: build first")
        return
    defined, used = {}, {}
    for o in objs:
        m = o[:-2]
        out = subprocess.run(["nm", "-g", os.path.join(BUILD, "src", sub, o)],
                             capture_output=True, text=True, check=True).stdout
        used[m] = set()
        for line in out.splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == "U":
                used[m].add(f[1])
            elif len(f) == 3 and f[1] in "TDBRV":
                defined[f[2]] = m
    edges = {m: {defined[s] for s in u if defined.get(s, m) != m}
             for m, u in used.items()}
    print(f"{what} objects: {len(objs)}, call edges between them: "
          f"{sum(len(v) for v in edges.values())}")
    for c in circles(edges):
        why = [f"{a} -> {b} ({', '.join(sorted(s for s in used[a] if defined.get(s) == b)[:3])})"
               for a in sorted(c) for b in sorted(edges[a] & c)]
        fail(f"{what} objects call each other around a circle: "
             + "; ".join(why))


def check_the_check():
    """A made-up tree with one circle and one library file including a
    daemon header: both must be found."""
    tmp = tempfile.mkdtemp(prefix="hd-layering-")
    try:
        def put(path, text):
            os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
            with open(os.path.join(tmp, path), "w") as fh:
                fh.write(text)
        put("src/lib/a.c", '#include "b.h"\n')
        put("src/lib/a.h", "")
        put("src/lib/b.c", '#include "c.h"\n')
        put("src/lib/b.h", "")
        put("src/lib/c.c", '  #  include "a.h"\n#include "d.h"\n')
        put("src/lib/c.h", "")
        put("src/handoffd/d.h", "")
        put("src/handoffctl/d.h", "")
        put("src/handoffd/main.c", "")
        put("src/handoffctl/main.c", "")
        edges, outside, _ = include_graph(tmp)
        found = circles(edges)
        want = {"src/lib/a", "src/lib/b", "src/lib/c"}
        if found != [want]:
            fail(f"self-check: circle a->b->c->a not found, got {found}")
        if outside != [("src/lib/c.c", "src/handoffd/d.h")]:
            fail(f"self-check: src/lib/c.c including d.h not found, got {outside}")
        twice = shared_names(tmp)
        if twice != {"d.h": ["src/handoffctl/d.h", "src/handoffd/d.h"]}:
            fail(f"self-check: d.h in two parts not found, got {twice}")
        print("self-check: a made-up circle, a library file including a "
              "daemon header and a name used twice are found")
    finally:
        shutil.rmtree(tmp)


# Files of other projects that comments name on purpose: headers of the
# system and of libraries, inih's own source, and patterns.
CITED_ELSEWHERE = {"linux/posix_acl_xattr.h", "nats/nats.h", "ini.c", "cmd_NAME.c", "a.b.c"}


def cited_files(root):
    """(file, cited) for each file name a comment under src/, include/,
    tests/ and bench/ names that the tree does not hold."""
    held, bad = set(), []
    for d, _, names in os.walk(root):
        if "/." in d or "/build" in d or "node_modules" in d:
            continue
        for n in names:
            held.add(n)
            held.add(os.path.relpath(os.path.join(d, n), root))
    for top in ("src", "include", "tests", "bench"):
        for d, _, names in os.walk(os.path.join(root, top)):
            if "node_modules" in d:
                continue
            for n in names:
                if not re.search(r"\.(c|h|cc)$", n):
                    continue
                path = os.path.join(d, n)
                with open(path, errors="replace") as f:
                    text = f.read()
                for c in re.findall(r"/\*.*?\*/|//[^\n]*", text, re.S):
                    for m in re.findall(r"(?<![\w.-])([\w./-]+\.(?:md|c|h|cc|py|mk|mjs|sh))\b", c):
                        if m in held or os.path.basename(m) in held or m in CITED_ELSEWHERE:
                            continue
                        bad.append((os.path.relpath(path, root), m))
    return bad


def check_cited():
    """A comment points only at files the repository holds (STYLE.md)."""
    bad = cited_files(SRC)
    if bad:
        fail("comments cite files the repository lacks: " +
             ", ".join(f"{f} cites {m}" for f, m in bad))
    print("comments cite only files the repository holds")


# The on-disk protocol is the storage layer's alone (issue 44, STYLE.md
# "One concern, one module"): no file of src/handoffd outside store/ moves,
# links, unlinks or writes a spool file itself, or touches the dirty set.
RAW_CALL = re.compile(r"\b(renameat2?|linkat|unlinkat|move_noreplace|write_atomic)[ \t]*\(")
DIRTY = re.compile(r"\bdirty\[|(?<!j)->dirty\b(?!\[)|\bsync_failed\b")


def store_breaches(root):
    """(file, what) for each file of src/handoffd outside store/ that
    calls a raw move or touches the dirty set."""
    bad = []
    d = os.path.join(root, "src", "handoffd")
    for n in sorted(os.listdir(d)):
        if not n.endswith(".c"):
            continue
        with open(os.path.join(d, n), errors="replace") as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for m in RAW_CALL.finditer(text):
            bad.append((n, m.group(1)))
        for m in DIRTY.finditer(text):
            bad.append((n, m.group(0)))
    return bad


def check_store():
    bad = store_breaches(SRC)
    for f, what in bad:
        fail(f"src/handoffd/{f} calls {what} itself: ask the store (store/store.h)")
    store = os.path.join(SRC, "src", "handoffd", "store")
    own = sorted(n for n in os.listdir(store) if n.endswith(".c"))
    print(f"files outside store/ that move spool files or touch the dirty set: {len(bad)}; "
          f"store/ sources: {len(own)}")
    # and it can fail: a made-up module that renames and marks dirty
    tmp = tempfile.mkdtemp(prefix="hd-layering-store-")
    try:
        os.makedirs(os.path.join(tmp, "src", "handoffd"))
        with open(os.path.join(tmp, "src", "handoffd", "x.c"), "w") as f:
            f.write("void f(void) { renameat(a, b, c, d); sp->dirty[SD_TMP] = 1; }\n")
        got = store_breaches(tmp)
        if got != [("x.c", "renameat"), ("x.c", "dirty[")]:
            fail(f"self-check: a module's own rename and dirty mark not found, got {got}")
    finally:
        shutil.rmtree(tmp)


# A handoff is parsed once into struct handoff (issue 44): its keys, and
# those of the documents that carry its id, are spelled in one file each.
KEYS = re.compile(r'"(handoff_id|from_agent|to_agent|initiated_at|expires_at|kid|payload_type)"')
KEY_OWNERS = {
    "handoff_doc.c": "the handoff's parse",
    "store/store_doc.c": "the sidecars' writer and reader (.outcome, .reason, .result)",
    "receipt.c": "a relay receipt's writer and reader",
}


def key_readers(root):
    """{file: [key, ...]} for each file of src/handoffd (and store/) that
    spells a handoff's key outside KEY_OWNERS."""
    bad = {}
    for sub in ("", "store"):
        d = os.path.join(root, "src", "handoffd", sub)
        if not os.path.isdir(d):
            continue
        for n in sorted(os.listdir(d)):
            rel = os.path.join(sub, n) if sub else n
            if not n.endswith(".c") or rel in KEY_OWNERS:
                continue
            with open(os.path.join(d, n), errors="replace") as f:
                text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
            keys = sorted(set(KEYS.findall(text)))
            if keys:
                bad[rel] = keys
    return bad


def check_handoff_keys():
    bad = key_readers(SRC)
    for f, keys in bad.items():
        fail(f"src/handoffd/{f} spells {', '.join(keys)}: take a const struct handoff * "
             "(handoff_doc.h) or a sidecar's struct (store/store_doc.h)")
    print(f"files of src/handoffd spelling a handoff's keys: {len(KEY_OWNERS)} owners "
          f"({', '.join(sorted(KEY_OWNERS))}), {len(bad)} others")
    # and it can fail: a made-up module that reads an id by key
    tmp = tempfile.mkdtemp(prefix="hd-layering-keys-")
    try:
        os.makedirs(os.path.join(tmp, "src", "handoffd", "store"))
        with open(os.path.join(tmp, "src", "handoffd", "x.c"), "w") as f:
            f.write('/* "to_agent" in a comment is fine */\n'
                    'const char *f(json_t *d) { return json_string_value('
                    'json_object_get(d, "handoff_id")); }\n')
        with open(os.path.join(tmp, "src", "handoffd", "handoff_doc.c"), "w") as f:
            f.write('const char *k = "from_agent";\n')
        got = key_readers(tmp)
        if got != {"x.c": ["handoff_id"]}:
            fail(f"self-check: a module's own read of handoff_id not found, got {got}")
    finally:
        shutil.rmtree(tmp)


# struct spool keeps the storage only (issue 44).
SPOOL_FIELDS_MAX = 20


def struct_fields(text, name):
    """The member names of `struct name { ... };` in C source text, one
    per declarator: a nested struct counts once, `int a, b;` twice."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    m = re.search(r"\bstruct\s+" + re.escape(name) + r"\s*\{", text)
    if not m:
        return None
    depth, i, decl, out = 1, m.end(), "", []
    while depth:
        c = text[i]
        i += 1
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and c == ";":
            # the declarators after a nested body, or the whole line
            tail = decl.rsplit("}", 1)[-1] if "}" in decl else decl
            parts = [d for d in re.split(r",(?![^()\[\]]*[)\]])", tail) if d.strip()]
            for d in parts:
                w = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*?\]|\(\*|\)\s*\(.*", " ", d))
                if w:
                    out.append(w[-1])
            decl = ""
        elif depth >= 1:
            decl += c
    return out


def check_spool_fields():
    path = os.path.join(SRC, "src", "handoffd", "spool.h")
    with open(path, errors="replace") as f:
        fields = struct_fields(f.read(), "spool")
    if fields is None:
        fail("src/handoffd/spool.h: no struct spool")
        return
    print(f"struct spool fields: {len(fields)} (at most {SPOOL_FIELDS_MAX}): "
          f"{' '.join(fields)}")
    if len(fields) > SPOOL_FIELDS_MAX:
        fail(f"struct spool has {len(fields)} fields, more than {SPOOL_FIELDS_MAX}: "
             "a module's own state goes in its own struct, held beside it (parts.h)")
    # and it can fail: a made-up struct of 3 members, one nested, one twice
    got = struct_fields("struct spool {\n int a, b; /* c; */\n"
                        " struct x { int y; int z; } w;\n"
                        " int (*hook)(struct spool *sp, int n);\n"
                        " char name[N + 1];\n};\n", "spool")
    if got != ["a", "b", "w", "hook", "name"]:
        fail(f"self-check: struct spool's members not counted right, got {got}")


def main():
    check_the_check()
    check_spool_fields()
    check_store()
    check_handoff_keys()
    check_cited()
    check_includes()
    check_names()
    check_symbols()
    check_symbols("handoffd", "handoffd")
    hdtest.finish("ok")


if __name__ == "__main__":
    main()
