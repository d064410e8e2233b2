"""The README's certificate for a first try (issue 47.1): its openssl
command, run as written (with a temp directory for /etc/handoffd and
localhost for hub.example), makes a key and certificate that a TLS
server serves and a client that trusts only that certificate (as curl
--cacert, SSL_CERT_FILE and NODE_EXTRA_CA_CERTS do) accepts under the
name, and refuses under another."""

import os
import re
import socket
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.environ.get("HD_SRC", "."), "tests", "py"))
import hdtest  # noqa: E402
from hdtest import check  # noqa: E402

SRC = os.environ.get("HD_SRC", ".")


def recipe():
    readme = open(os.path.join(SRC, "README.md")).read()
    m = re.search(r"^\*\*A certificate for a first try\*\*.*?^```sh\n(.*?)^```", readme, re.S | re.M)
    check(m is not None, "the README has the certificate recipe")
    return m.group(1)


def main():
    with hdtest.tmpdir() as t:
        script = recipe().replace("/etc/handoffd/", t + "/").replace("hub.example", "localhost")
        # the chown names the packaged user; a first try may not have it
        script = "\n".join(ln for ln in script.splitlines() if not ln.startswith("chown "))
        p = subprocess.run(["sh", "-euc", script], capture_output=True, text=True)
        check(p.returncode == 0, f"the README's openssl command: {p.stderr}")
        cert, key = os.path.join(t, "hub.crt"), os.path.join(t, "hub.key")
        check(os.path.exists(cert) and os.path.exists(key), "hub.crt and hub.key made")

        srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        srv.load_cert_chain(cert, key)
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(4)
        port = ls.getsockname()[1]

        def serve():
            for _ in range(2):
                c, _ = ls.accept()
                try:
                    with srv.wrap_socket(c, server_side=True) as s:
                        s.sendall(b"ok")
                except (ssl.SSLError, OSError):
                    pass
        th = threading.Thread(target=serve, daemon=True)
        th.start()

        cli = ssl.create_default_context(cafile=cert)
        with socket.create_connection(("127.0.0.1", port), timeout=10 * hdtest.SLOW) as c:
            with cli.wrap_socket(c, server_hostname="localhost") as s:
                check(s.recv(2) == b"ok", "served")
        print("the README's certificate: trusted by a client given it, under localhost")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10 * hdtest.SLOW) as c:
                with cli.wrap_socket(c, server_hostname="other.example"):
                    pass
            check(False, "a client checking another name accepted it")
        except ssl.SSLCertVerificationError as e:
            print(f"and refused under another name: {e.verify_message}")
        th.join(10 * hdtest.SLOW)
        ls.close()


hdtest.run(main)
