"""``cvb studio``: the Streamlit studio started behind its Host check (``studio/serve.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cvb_engine.cli import CliError, command


def _studio_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: only this machine can open the studio)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to NAME (or NAME:PORT), e.g. behind a reverse "
        "proxy; repeatable, added to $CVB_STUDIO_ALLOWED_HOSTS. Any other Host is refused "
        "(DNS rebinding)",
    )
    p.add_argument(
        "--scenarios",
        help="scenario folder the studio reads and the Author page edits (default: "
        "$CVB_SCENARIOS, else the shipped library, with Author saves in the user folder)",
    )
    p.add_argument("--db", help="database URL (default: $CVB_DATABASE_URL or data/cvb.db)")


@command("studio", _studio_args)
def cmd_studio(args: argparse.Namespace) -> int:
    """Start the Streamlit studio (Author, Run, Results)."""
    import importlib.util
    import os
    import subprocess

    from cvb_engine import hosts

    # find_spec locates the studio without importing it: the engine stays UI-free.
    spec = importlib.util.find_spec("studio")
    if spec is None or spec.origin is None:
        raise CliError("the studio package is not installed (pip install -e .)")
    app = Path(spec.origin).parent / "streamlit_app.py"
    env = dict(os.environ)
    if args.scenarios:
        env["CVB_SCENARIOS"] = str(Path(args.scenarios).resolve())
    if args.db:
        env["CVB_DATABASE_URL"] = args.db
    allowed = [*hosts.allowed_from_env(env), *args.allow_host]
    try:
        hosts.normalise_allowed(allowed)
    except ValueError as exc:
        raise CliError(f"--allow-host / ${hosts.ALLOWED_HOSTS_ENV}: {exc}") from None
    env[hosts.ALLOWED_HOSTS_ENV] = ",".join(allowed)
    env["CVB_STUDIO_PARENT_PID"] = str(os.getpid())  # the studio stops when this process does
    # studio/serve.py is `streamlit run` with the Host check in front (DNS rebinding).
    command_line = [
        sys.executable,
        str(app.parent / "serve.py"),
        str(app),
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        # no Deploy button (nor rerun / clear cache); the theme and print menu stay
        "--client.toolbarMode",
        "viewer",
    ]
    print(f"CVB Studio on http://{args.host}:{args.port}  (Ctrl-C stops it)", flush=True)
    try:
        return subprocess.call(command_line, env=env)
    except KeyboardInterrupt:
        return 0
