"""[relay]'s receipt keys and servers are checked alike by `handoffd -n`,
the start and a reload, and a key that does not load never crashes the
start (issue 33, items 1 to 3):

- each bad case (host_key missing, of mode 0644, an HMAC key, a .pub file;
  host_pubkey_dir missing, writable by group or by others; no HOST.pub of
  a [remote] host, or one of mode 0666; a tls_ca that does not exist, a
  nkey_seed that is a directory; servers with an http:// scheme or none)
  is refused by `-n` and by the start alike, both exit 2 (handoffd(8)
  EXIT STATUS: a configuration error, unsafe keys included) with one line
  that says what is wrong and gives errno's text once (the start used to
  die of SIGSEGV: the relay's loop handles were freed while in the loop);
- the relay's own start failing after those checks (SPOOL/receipts a
  file) ends it with exit 1 and its reason, never a crash;
- a relay thread that does not start (pthread_create failing for the
  first, then for the second of the two, through an LD_PRELOAD shim built
  here) ends the start with exit 1 and the log line, never a crash (the
  stop joined a thread never made);
- while the daemon runs, a HOST.pub made writable by others, or the
  directory made writable by others, is a problem line in `handoffctl
  status` (degraded) as long as it lasts, a receipt signed by that host is
  dropped saying why, and a reload is refused with the start's message.

HD_VALGRIND=1 runs each start of a bad case under valgrind (the system
libuv is not instrumented for ASan): any error valgrind finds fails it."""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hded25519  # noqa: E402
import hdproto  # noqa: E402
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

VALGRIND = os.environ.get("HD_VALGRIND") == "1"

# Fails the Nth pthread_create() of a thread function of handoffd's own
# (HD_FAIL_THREAD=N), not libnats's: the relay's worker (1), then its
# fetcher (2).
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* the first object dl_iterate_phdr() reports is the program itself */
static int in_program(struct dl_phdr_info *i, size_t size, void *data)
{
        uintptr_t a = *(uintptr_t *)data;

        (void)size;
        for (int k = 0; k < i->dlpi_phnum; k++) {
                const ElfW(Phdr) *ph = &i->dlpi_phdr[k];
                uintptr_t lo = i->dlpi_addr + ph->p_vaddr;
                if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
                        return 1;
        }
        return 2;
}

static pthread_t made[256];
static int n_made;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
        static int calls;
        create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        const char *n = getenv("HD_FAIL_THREAD");
        uintptr_t fa = (uintptr_t)f;
        int r;

        if (n && dl_iterate_phdr(in_program, &fa) == 1 && ++calls == atoi(n))
                return EAGAIN;
        r = real(t, a, f, arg);
        pthread_mutex_lock(&lock);
        if (r == 0 && n_made < 256)
                made[n_made++] = *t;
        pthread_mutex_unlock(&lock);
        return r;
}

/* A join of a pthread_t that no pthread_create() made is undefined
 * behaviour (glibc happens to answer ESRCH for a zeroed one): said, and
 * the process aborted, so that the test sees it. */
int pthread_join(pthread_t t, void **ret)
{
        int (*real)(pthread_t, void **) = (int (*)(pthread_t, void **))dlsym(RTLD_NEXT, "pthread_join");
        bool known = false;

        pthread_mutex_lock(&lock);
        for (int i = 0; i < n_made && !known; i++)
                known = pthread_equal(made[i], t);
        pthread_mutex_unlock(&lock);
        if (!known) {
                static const char m[] = "shim: pthread_join of a thread never created\n";
                (void)!write(2, m, sizeof(m) - 1);
                abort();
        }
        return real(t, ret);
}
"""


def keygen(env, path):
    env.ctl("keygen", "--ed25519", "-o", path, check_rc=0)
    return path


def hostdir(env, name, mode=0o755, pub=None, pub_mode=0o644):
    d = os.path.join(env.dir, name)
    os.makedirs(d, exist_ok=True)
    if pub:
        shutil.copy(pub, os.path.join(d, "h2.pub"))
        os.chmod(os.path.join(d, "h2.pub"), pub_mode)
    os.chmod(d, mode)
    return d


def relay_text(servers, host_key, pubdir):
    lines = ["[relay]", f"servers = {servers}", "host = h1"]
    if host_key:
        lines.append(f"host_key = {host_key}")
    if pubdir:
        lines.append(f"host_pubkey_dir = {pubdir}")
    return "\n".join(lines) + "\n\n[remote carol]\nhost = h2\n"


def errno_once(text):
    """errno's text at most once in text, and never an EPERM appended to
    a message that already says why."""
    return text.count("No such file or directory") <= 1 and "Operation not permitted" not in text


def run_start(conf, env_vars=None, valgrind=VALGRIND):
    argv = [hdtest.HANDOFFD, "-f", "-c", conf]
    if valgrind:
        argv = ["valgrind", "-q", "--error-exitcode=99", "--trace-children=no"] + argv
    e = dict(os.environ)
    e.pop("NOTIFY_SOCKET", None)
    e.update(env_vars or {})
    wait = (120 if valgrind else 20) * hdtest.SLOW
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=wait)
    except subprocess.TimeoutExpired as t:
        # it started: killed by subprocess.run
        out = t.stderr.decode(errors="replace") if isinstance(t.stderr, bytes) else (t.stderr or "")
        return None, f"(still running after {wait}s: it started)\n{out}"
    return p.returncode, p.stderr


def refused_cases(env, port):
    """A bad config refused by -n and by the start, each case."""
    good_key = keygen(env, os.path.join(env.dir, "h1.key"))
    h2_key = keygen(env, os.path.join(env.dir, "h2.key"))
    h2_pub = os.path.join(env.dir, "h2.pub")
    loose = os.path.join(env.dir, "h1-0644.key")
    shutil.copy(good_key, loose)
    os.chmod(loose, 0o644)
    good_dir = hostdir(env, "hosts", pub=h2_pub)
    nats = f"nats://127.0.0.1:{port}"
    cases = [
        ("host_key missing", relay_text(nats, os.path.join(env.dir, "nope.key"), good_dir),
         ["[relay] host_key: key file", "nope.key': No such file or directory"]),
        ("host_key of mode 0644", relay_text(nats, loose, good_dir),
         ["[relay] host_key: key file", "has mode 0644", "(chmod 600 or 640)"]),
        ("host_key an HMAC key", relay_text(nats, env.key_path, good_dir),
         ["[relay] host_key", "is an HMAC key, not an Ed25519 secret key"]),
        ("host_key a .pub file", relay_text(nats, h2_pub, good_dir),
         ["[relay] host_key", "is an Ed25519 public key, not an Ed25519 secret key"]),
        ("host_pubkey_dir missing", relay_text(nats, good_key, os.path.join(env.dir, "nohosts")),
         ["[relay] host_pubkey_dir", "nohosts: No such file or directory"]),
        ("host_pubkey_dir writable by others",
         relay_text(nats, good_key, hostdir(env, "hosts777", 0o777, pub=h2_pub)),
         ["[relay] host_pubkey_dir", "has mode 0777", "not be writable by group or others"]),
        ("host_pubkey_dir writable by group",
         relay_text(nats, good_key, hostdir(env, "hosts775", 0o775, pub=h2_pub)),
         ["[relay] host_pubkey_dir", "has mode 0775"]),
        ("no HOST.pub of a [remote] host", relay_text(nats, good_key, hostdir(env, "hosts-empty")),
         ["[relay] host_pubkey_dir", "'h2.pub': No such file or directory", "host h2, [remote carol]"]),
        ("a HOST.pub of mode 0666",
         relay_text(nats, good_key, hostdir(env, "hosts666", pub=h2_pub, pub_mode=0o666)),
         ["[relay] host_pubkey_dir", "'h2.pub' has mode 0666"]),
        ("tls_ca missing", relay_text(nats, good_key, good_dir).replace(
            "host = h1\n", f"host = h1\ntls_ca = {env.dir}/nope-ca.pem\n"),
         ["[relay] tls_ca", "nope-ca.pem: No such file or directory"]),
        ("nkey_seed a directory", relay_text(nats, good_key, good_dir).replace(
            "host = h1\n", f"host = h1\nnkey = UABC\nnkey_seed = {env.dir}\n"),
         ["[relay] nkey_seed", "is not a regular file"]),
        ("servers http://", relay_text(f"http://127.0.0.1:{port}", good_key, good_dir),
         ["[relay] servers: 'http://127.0.0.1:", "is not a NATS server URL"]),
        ("servers without a scheme", relay_text(f"127.0.0.1:{port}", good_key, good_dir),
         ["[relay] servers: '127.0.0.1:", "is not a NATS server URL"]),
    ]
    for i, (what, text, wants) in enumerate(cases):
        conf = env.write_config(f"bad{i}", extra=text)
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)
        out = p.stdout + p.stderr
        check(p.returncode == 2 and all(w in out for w in wants) and errno_once(out),
              f"{what}: handoffd -n exit {p.returncode}, want 2 and {wants} (errno once):\n{out}")
        rc, err = run_start(conf)
        check(rc == 2 and all(w in err for w in wants) and errno_once(err),
              f"{what}: the start exit {rc}, want 2 and {wants} (errno once):\n{err[-3000:]}")
        print(f"refused by -n and the start, exit 2: {what}")
    return good_key, h2_key, good_dir


def receipts_not_a_dir(env, conf):
    """The relay's own start fails after the keys passed (SPOOL/receipts/
    cannot be opened): exit 1 with the reason, nothing of the relay left
    in the loop (the same free as a key that does not load there)."""
    spool = os.path.join(env.dir, "spool-rf")
    os.makedirs(spool)
    open(os.path.join(spool, "receipts"), "w").close()
    with open(conf) as f:
        text = f.read().replace(f"dir = {env.spool}\n", f"dir = {spool}\n")
    conf2 = env.write_config("rf", text=text)
    rc, err = run_start(conf2)
    check(rc == 1 and "Cannot open receipts/ in the spool: Not a directory" in err,
          f"SPOOL/receipts a file: exit {rc}, want 1 and the log line:\n{err[-3000:]}")
    print("the relay's start failing on SPOOL/receipts (a file): exit 1, said once")


def thread_failures(env, conf):
    """The relay's worker, then its fetcher, does not start: exit 1."""
    so = hdtest.build_preload(env, SHIM, "pthread_create shim")
    for n, which in ((1, "worker"), (2, "fetcher")):
        e = hdtest.preload_env(so, HD_FAIL_THREAD=str(n))
        rc, err = run_start(conf, e)
        check(rc == 1 and "Cannot start the relay threads: Resource temporarily unavailable" in err,
              f"the {which} thread not started: exit {rc}, want 1 and the log line:\n{err[-3000:]}")
        print(f"the relay's {which} thread not started: exit 1, said once")


def receipt(h2, hid="x-1"):
    base = {"type": "handoff-receipt", "version": 1, "handoff_id": hid, "outcome": "consumed",
            "reason": "", "detail": "", "host": "h2", "origin": "h1",
            "at": hdproto.iso(hdproto.now())}
    return json.dumps(h2.sign(base)).encode()


def status_problem(env, conf):
    p = env.ctl("status", "-c", conf)
    probs = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("problem:")]
    return p.returncode, probs, p.stdout


def while_running(env, ns, good_key, h2_key, good_dir):
    conf = env.write_config("d", extra=relay_text(ns.url, good_key, good_dir))
    d = env.start(name="d", conf=conf)
    hdtest.wait_for(lambda: (d.status().get("relay") or {}).get("ready"), 20, "the relay ready")
    pub = os.path.join(good_dir, "h2.pub")
    line = open(h2_key).read().split()
    h2 = hded25519.Key(base64.b64decode(line[1]), kid=line[2])
    cl = natsrv.Client(ns.url)
    try:
        check(d.status()["relay"]["receipts"].get("problem") is None, "no problem at start")
        rc, probs, out = status_problem(env, conf)
        check(not any("receipts" in x for x in probs), f"status at start:\n{out}")

        for what, change, undo, want in (
                ("h2.pub of mode 0666", lambda: os.chmod(pub, 0o666), lambda: os.chmod(pub, 0o644),
                 "'h2.pub' has mode 0666"),
                ("host_pubkey_dir of mode 0777", lambda: os.chmod(good_dir, 0o777),
                 lambda: os.chmod(good_dir, 0o755), "has mode 0777")):
            dropped = d.status()["relay"]["receipts"]["dropped"]
            change()
            st = d.status()["relay"]["receipts"]
            check(want in (st.get("problem") or ""), f"{what}: status receipts.problem: {st}")
            rc, probs, out = status_problem(env, conf)
            check(rc != 0 and "degraded" in out and any("receipts are dropped" in x and want in x
                                                         for x in probs),
                  f"{what}: handoffctl status exit {rc}, want a problem line:\n{out}")
            # a receipt signed by h2 now: dropped, saying why
            ack = cl.js_publish("handoff.h1.receipt.h2", receipt(h2), msg_id=f"x-{dropped}:consumed")
            check(ack.get("stream") == "HANDOFF", f"PubAck {ack}")
            hdtest.wait_for(lambda: d.status()["relay"]["receipts"]["dropped"] > dropped, 15,
                            f"{what}: the receipt dropped")
            check("no usable key for host h2" in d.logs() and want in d.logs(),
                  f"{what}: the drop says why:\n{d.logs()[-2000:]}")
            # a reload is refused as the start would be
            n = d.logs().count("Reload failed")
            d.send(signal.SIGHUP)
            hdtest.wait_for(lambda: d.logs().count("Reload failed") > n, 15, f"{what}: reload refused")
            tail = d.logs().split("Reload failed")[-1].splitlines()[0]
            check(want in tail, f"{what}: the reload's refusal says why: {tail}")
            undo()
            check(d.status()["relay"]["receipts"].get("problem") is None, f"{what}: repaired, no problem")
            rc, probs, out = status_problem(env, conf)
            # the refused reload is told until a reload works (issue 47.5)
            check(not any("receipts" in x and not x.startswith("problem: the last reload failed")
                          for x in probs), f"{what}: repaired:\n{out}")
            print(f"while running, {what}: status degraded with its problem line, a receipt "
                  "dropped saying why, the reload refused; repaired: gone")
        n = d.logs().count("Reloaded")
        d.send(signal.SIGHUP)
        hdtest.wait_for(lambda: d.logs().count("Reloaded") > n, 15, "the reload of the repaired set-up")
        rc, probs, out = status_problem(env, conf)
        check(not any(x.startswith("problem: the last reload failed") for x in probs),
              f"a reload that worked clears the failed one:\n{out}")
    finally:
        cl.close()
        h2.close()
    check(d.stop() == 0, "stops with exit 0")


def main():
    check(natsrv.available(), f"{natsrv.NATS_SERVER} is needed")
    with hdtest.Env(agents=["alice"]) as env:
        port = natsrv.free_port()
        good_key, h2_key, good_dir = refused_cases(env, port)
        conf = env.write_config("good", extra=relay_text(f"nats://127.0.0.1:{port}", good_key, good_dir))
        p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True, text=True)
        check(p.returncode == 0 and "receipts: sent (host_key), accepted" in p.stdout,
              f"the good set-up passes -n:\n{p.stdout}{p.stderr}")
        receipts_not_a_dir(env, conf)
        thread_failures(env, conf)
        with natsrv.Cluster(env.dir, nodes=1) as ns:
            while_running(env, ns, good_key, h2_key, good_dir)


hdtest.run(main)
