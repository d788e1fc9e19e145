"""``cvb serve-local`` and ``cvb demo``: the bundled model served, and the first-run demo
against it (:mod:`cvb_engine.local` starts and stops the server).

The demo runs one scenario per category × 3 arms × 1 repetition with a small
``max_tokens``, prints the report and says how to open it in the studio. Its run id is
fixed per endpoint, so running it again resumes instead of starting over.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cvb_engine.cli import CliError, command
from cvb_engine.endpoints import LOCAL_CONCURRENCY, LOCAL_PORT, LOCAL_TIMEOUT_S
from cvb_engine.run_ids import run_id_arg
from cvb_engine.safe_text import terminal_text

DEMO_MAX_TOKENS = 160

# --------------------------------------------------------------------------- serve-local


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=LOCAL_PORT)


@command("serve-local", _serve_args)
def cmd_serve_local(args: argparse.Namespace) -> int:
    """Serve the bundled SmolLM2-135M model on 127.0.0.1 (OpenAI-compatible)."""
    from cvb_engine.local import LOCAL_ALIAS, is_serving, serve_until_stopped, start_server

    base_url = f"http://127.0.0.1:{args.port}/v1"
    if is_serving(base_url):
        raise CliError(f"something already answers on {base_url}")
    proc = start_server(args.port)
    print(
        f"serving {LOCAL_ALIAS} at {base_url}  (preset: --endpoint local; Ctrl-C stops it)",
        flush=True,
    )
    return serve_until_stopped(proc)


# --------------------------------------------------------------------------- demo


def demo_scenarios(root: str) -> list[str]:
    """One scenario per CVB category: the first by id, so the demo is stable."""
    from cvb_engine.scenario import CVB_CATEGORIES, load_library

    library = load_library(root)
    picked = []
    for category in CVB_CATEGORIES:
        ids = sorted(s for s, item in library.items() if item.scenario.category == category)
        if ids:
            picked.append(ids[0])
    if not picked:
        raise CliError(f"no CVB scenarios under {root}")
    return picked


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default="local", help="preset to run against (default: local)")
    p.add_argument("--models", help="model ids (default: the preset's, or probed)")
    p.add_argument(
        "--scenarios", help="scenario directory (default: $CVB_SCENARIOS, else the shipped library)"
    )
    p.add_argument("--only", help="comma-separated scenario ids instead of one per category")
    p.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS)
    p.add_argument("--port", type=int, default=LOCAL_PORT, help="port of the local server")
    p.add_argument("--run-id", type=run_id_arg, help="default: demo-<endpoint>")
    p.add_argument("--db", help="database URL (default: data/cvb.db)")


@command("demo", _demo_args)
def cmd_demo(args: argparse.Namespace) -> int:
    """The first-run demo: a small matrix against the bundled local model (or a preset)."""
    from cvb_engine.cli import main
    from cvb_engine.endpoints import BUILTIN, resolve
    from cvb_engine.library import scenarios_root
    from cvb_engine.local import local_server

    args.scenarios = str(scenarios_root(args.scenarios))
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
        argv += ["--concurrency", str(LOCAL_CONCURRENCY), "--timeout", f"{LOCAL_TIMEOUT_S:g}"]
        if not args.models:
            argv += ["--models", ",".join(preset.models)]
        Path("data").mkdir(exist_ok=True)
        with local_server(args.port, Path("data") / "local-server.log") as base_url:
            # named, so the store (and the studio's Run page) calls it "local", not "custom"
            status = main(
                [*argv, "--endpoint", "local", "--base-url", base_url, "--api-key-env", ""]
            )
    else:
        resolve(args.endpoint, None, None)  # an unknown preset stops here, not in the run
        status = main([*argv, "--endpoint", args.endpoint])
    if status != 0:
        return status
    print()
    report = ["report", run_id] + (["--db", args.db] if args.db else [])
    main(report)
    print(
        f"\nThe run is stored as '{terminal_text(run_id, multiline=False)}'. Open it in the studio with `cvb studio` "
        "(Results page), re-run `cvb demo` to resume it, or run the full benchmark with "
        "`cvb run --endpoint groq` (see README)."
    )
    return 0
