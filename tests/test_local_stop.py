"""``cvb serve-local`` stopped by a signal takes its server's process group with it.

The real server (llama.cpp, tests/test_local_model.py) is slow to start; a stand-in
child in its own session, started the way :func:`cvb_engine.local.start_server` starts
it, shows the same thing: after ``kill -TERM`` of the parent, nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

PARENT = """
import subprocess, sys
from cvb_engine.local import serve_until_stopped
# the stand-in server, and a grandchild of its own, as llama.cpp's may have
child = subprocess.Popen(
    [sys.executable, "-c",
     "import subprocess, sys, time; "
     "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
     "print(g.pid, flush=True); time.sleep(600)"],
    stdout=subprocess.PIPE, text=True, start_new_session=True,
)
grandchild = child.stdout.readline().strip()
print(child.pid, grandchild, flush=True)
sys.exit(serve_until_stopped(child))
"""


def gone(pid: int, wait_s: float = 15.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # exited, waiting for its (new) parent to reap it
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
def test_a_stop_signal_stops_the_server_group(sig: signal.Signals) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(not gone(p, 0.2) for p in pids)
        parent.send_signal(sig)
        assert parent.wait(timeout=30) == 0
        assert gone(pids[0]), "the server outlived cvb serve-local"
        assert gone(pids[1]), "the server's own child outlived cvb serve-local"
    finally:
        parent.kill()
        parent.wait()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
