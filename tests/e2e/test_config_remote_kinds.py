"""[relay] host_pubkey_dir beside [remote NAME] a2a = URL remotes (issue 43,
item 11): an A2A remote has no host and sends no receipts, so it needs no
HOST.pub.  `handoffd -n` used to die of SIGSEGV (strcmp on the A2A
remote's NULL host in config_host_pubkeys_check) when a host remote came
before it, and refused the config with "key file '(null).pub'" when it was
the only remote; the start did the same.  Each order passes -n with exit 0
and the start reaches READY with the relay ready, then stops with exit 0."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
import natsrv  # noqa: E402
from hdtest import check  # noqa: E402

HOST = "[remote carol]\nhost = h2\n"


def a2a_remote(env, name):
    return f"[remote {name}]\na2a = https://a2a.example.com/a2a\ntoken_file = {env.dir}/a2a.token\n"


def relay_text(env, url, remotes):
    return (f"[relay]\nservers = {url}\nhost = h1\nhost_key = {env.dir}/h1.key\n"
            f"host_pubkey_dir = {env.dir}/hosts\n\n" + "\n".join(remotes))


def main():
    check(natsrv.available(), f"{natsrv.NATS_SERVER} is needed")
    with hdtest.Env(agents=["alice"]) as env:
        env.ctl("keygen", "--ed25519", "-o", os.path.join(env.dir, "h1.key"), check_rc=0)
        env.ctl("keygen", "--ed25519", "-o", os.path.join(env.dir, "h2.key"), check_rc=0)
        hosts = os.path.join(env.dir, "hosts")
        os.makedirs(hosts, mode=0o755)
        os.rename(os.path.join(env.dir, "h2.pub"), os.path.join(hosts, "h2.pub"))
        with open(os.path.join(env.dir, "a2a.token"), "w") as f:
            f.write("TEST-ONLY-token\n")
        os.chmod(os.path.join(env.dir, "a2a.token"), 0o600)
        with natsrv.Cluster(env.dir, nodes=1) as ns:
            cases = [
                ("a host remote, then an a2a remote", [HOST, a2a_remote(env, "zed")]),
                ("an a2a remote, then a host remote", [a2a_remote(env, "zed"), HOST]),
                ("an a2a remote alone", [a2a_remote(env, "zed")]),
                ("two a2a remotes between host remotes",
                 [HOST, a2a_remote(env, "zed"), a2a_remote(env, "yan"), "[remote dave]\nhost = h2\n"]),
            ]
            for i, (what, remotes) in enumerate(cases):
                conf = env.write_config(f"k{i}", extra=relay_text(env, ns.url, remotes))
                p = subprocess.run([hdtest.HANDOFFD, "-n", "-c", conf], capture_output=True,
                                   text=True, timeout=60 * hdtest.SLOW)
                check(p.returncode == 0 and ": ok (" in p.stdout
                      and "accepted (host_pubkey_dir)" in p.stdout,
                      f"{what}: handoffd -n exit {p.returncode}, want 0 and ok:\n{p.stdout}{p.stderr}")
                d = env.start(name=f"k{i}", conf=conf)
                hdtest.wait_for(lambda: (d.status().get("relay") or {}).get("ready"), 20,
                                f"{what}: the relay ready")
                rc = d.stop()
                check(rc == 0, f"{what}: the daemon stops with exit {rc}, want 0")
                print(f"{what}: handoffd -n exit 0, the start READY with the relay ready, exit 0")


hdtest.run(main)
