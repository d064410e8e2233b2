#!/usr/bin/env python3
"""handoff-a2a with a fault, for tests/e2e/test_a2a_helper_down.py: run
by handoffd as its HD_A2A_HELPER.  The first time it runs (no file at
HD_CUT_MARK yet) it runs the real helper (HD_REAL_A2A) on handoffd's
requests and passes its first answer on broken as HD_CUT_MODE says:

  half   the first half of the line, no newline, then its output closes
         and it exits (the real helper killed): a helper that died
         mid-line;
  junk   a whole line that is no answer, then it waits to be stopped.

Each later run is the real helper itself (exec)."""

import os
import signal
import subprocess
import sys

real, mark, mode = os.environ["HD_REAL_A2A"], os.environ["HD_CUT_MARK"], os.environ["HD_CUT_MODE"]
if os.path.exists(mark):
    os.execv(real, [real])
open(mark, "w").close()
p = subprocess.Popen([real], stdout=subprocess.PIPE)     # handoffd's requests: our stdin
line = p.stdout.readline()
with open(mark, "w") as f:
    f.write(line.decode(errors="replace"))
p.kill()
p.wait()
if mode == "half":
    os.write(1, line[:len(line) // 2])
    sys.exit(0)
os.write(1, b"this\tis\tno\tanswer\n")
while True:            # handoffd stops a helper whose line does not check (SIGKILL)
    signal.pause()
