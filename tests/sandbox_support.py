"""Where the sandbox does not work, its tests skip, or fail under ``CVB_REQUIRE_SANDBOX=1``.

``.ci/run`` sets the variable (as it sets ``CVB_REQUIRE_PG`` and ``CVB_REQUIRE_BROWSER``):
a CI machine where bwrap cannot run would otherwise pass with the isolation untested.
Only bwrap is required: it is the default backend; the weaker ones are tested where
they work.
"""

from __future__ import annotations

import os

import pytest

from cvb_engine import sandbox

REQUIRE_ENV = "CVB_REQUIRE_SANDBOX"


def required(name: str = "bwrap") -> bool:
    """Whether a missing ``name`` backend fails the test instead of skipping it."""
    return name == "bwrap" and os.environ.get(REQUIRE_ENV) == "1"


def unavailable(name: str, problem: str) -> None:
    """Skip the calling test for want of ``name``; fail it where that backend is required."""
    reason = f"{name} does not work here: {problem}"
    if required(name):
        pytest.fail(f"{REQUIRE_ENV}=1: {reason}")
    pytest.skip(reason)


def need(name: str = "bwrap") -> None:
    """Go on only where the ``name`` backend works (see :func:`unavailable`)."""
    problem = sandbox.self_test(name)
    if problem is not None:
        unavailable(name, problem)
