"""``cvb run`` as a program, and the runner's names where they used to be.

The runner is the package :mod:`cvb_engine.run`; this module keeps
``python -m cvb_engine.runner`` (the same as ``cvb run``; the studio launches runs
so) and ``from cvb_engine.runner import BenchmarkRun, ...`` working. Its names are
looked up when first used: run as a program it imports nothing before the CLI does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvb_engine.run import (
        BenchmarkRun,
        Cell,
        FatalEndpointError,
        Matrix,
        Progress,
        RunError,
        RunOptions,
        RunOutcome,
        TerminalProgress,
        layer_state_root,
        pool_path,
        print_dry_run,
        select_scenarios,
    )


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'cvb_engine.runner' has no attribute {name!r}")
    import cvb_engine.run

    return getattr(cvb_engine.run, name)


if __name__ == "__main__":
    # Run as a program this file is `cvb run`: it hands the process to the CLI's entry
    # point, which imports the runner (the runner never imports the CLI).
    import runpy

    sys.argv[1:1] = ["run"]
    runpy.run_module("cvb_engine.cli", run_name="__main__", alter_sys=True)


__all__ = [
    "BenchmarkRun",
    "Cell",
    "FatalEndpointError",
    "Matrix",
    "Progress",
    "RunError",
    "RunOptions",
    "RunOutcome",
    "TerminalProgress",
    "layer_state_root",
    "pool_path",
    "print_dry_run",
    "select_scenarios",
]
