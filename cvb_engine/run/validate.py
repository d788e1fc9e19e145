"""The checks a run's options pass before anything is loaded or sent (pure)."""

from __future__ import annotations

from cvb_engine.run_ids import RunIdError, check_run_id
from cvb_engine.run_options import RunOptions


def option_problems(o: RunOptions) -> list[str]:
    """What is wrong with ``o`` on its own, each problem a message for the user.

    The options that need the scenario library, the endpoint or the store (a
    scenario id, an arm's layer, a preset) are checked when those are read.
    """
    problems: list[str] = []
    if o.run_id is not None:
        try:
            check_run_id(o.run_id, "run_id")
        except RunIdError as exc:
            problems.append(str(exc))
    if o.runs < 1 or o.concurrency < 1 or o.max_tokens < 1 or o.max_response_chars < 1:
        problems.append(
            "--runs, --concurrency, --max-tokens and --max-response-chars must be at least 1"
        )
    if o.lease_s <= 0:
        problems.append("--lease must be more than 0 seconds")
    if o.join and not o.run_id:
        problems.append("--join needs --run-id: the run to take part in")
    return problems


__all__ = ["option_problems"]
