"""``cvb run --endpoint local`` sends one request at a time and waits longer unless told
otherwise: the bundled server answers one request at a time, and the defaults for hosted
endpoints (8 in flight, 60 s) timed out 7 of 8 cells on a first run (found by the issue-28
held-out check)."""

from __future__ import annotations

import argparse

import pytest

from cvb_engine.cli.run import add_run_arguments, options_from_args
from cvb_engine.endpoints import LOCAL_CONCURRENCY, LOCAL_TIMEOUT_S
from cvb_engine.run_options import DEFAULT_OPTIONS as D
from cvb_engine.run_options import RunOptions


def _options(*argv: str) -> RunOptions:
    p = argparse.ArgumentParser()
    add_run_arguments(p)
    return options_from_args(p.parse_args(list(argv)))


@pytest.mark.parametrize(
    ("argv", "concurrency", "timeout"),
    [
        ((), D.concurrency, D.timeout_s),
        (("--endpoint", "groq"), D.concurrency, D.timeout_s),
        (("--endpoint", "local"), LOCAL_CONCURRENCY, LOCAL_TIMEOUT_S),
        (("--endpoint", "local", "--concurrency", "3"), 3, LOCAL_TIMEOUT_S),
        (("--endpoint", "local", "--timeout", "20"), LOCAL_CONCURRENCY, 20.0),
        (("--endpoint", "groq", "--concurrency", "2", "--timeout", "5"), 2, 5.0),
        (("--base-url", "http://127.0.0.1:8765/v1"), D.concurrency, D.timeout_s),
    ],
)
def test_concurrency_and_timeout_defaults(
    argv: tuple[str, ...], concurrency: int, timeout: float
) -> None:
    options = _options(*argv)
    assert (options.concurrency, options.timeout_s) == (concurrency, timeout)


def test_the_local_defaults_are_gentler_than_the_hosted_ones() -> None:
    assert D.concurrency > LOCAL_CONCURRENCY and D.timeout_s < LOCAL_TIMEOUT_S
