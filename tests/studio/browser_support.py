"""What the real-browser tests share: Debian's chromium, free ports, starting and stopping the studio.

Without chromium or Playwright a browser test is skipped with the reason; with
``CVB_REQUIRE_BROWSER=1`` (set by ``.ci/run``, as ``CVB_REQUIRE_PG=1`` is) it
fails instead, so CI never passes with the browser tests left out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# As root on a machine without network: no sandbox, no background traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_S = 60
REQUIRE_ENV = "CVB_REQUIRE_BROWSER"


def require_browser() -> None:
    """Skip the calling test when chromium or Playwright is missing (fail under
    ``CVB_REQUIRE_BROWSER=1``)."""
    import importlib.util

    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} not found")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright is not installed")
    if not missing:
        return
    reason = "; ".join(missing) + " (scripts/setup.sh installs both unless CVB_SETUP_BROWSER=0)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[Any], log: Path) -> None:
    """Wait until the studio at ``url`` answers its health check (or fail with its log)."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"cvb studio exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"cvb studio did not answer within {STARTUP_S} s:\n{log.read_text()}")


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stop a process started in its own session, with everything it started."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except ProcessLookupError:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def serving_studio(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``cvb studio ARGS`` on a free port, in a session of its own; yields its URL once it
    answers its health check, and stops it with everything it started."""
    port = free_port()
    cvb = shutil.which("cvb")
    command = [cvb] if cvb else [sys.executable, "-m", "cvb_engine.cli"]
    command += ["studio", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield url
    finally:
        stop(proc)
