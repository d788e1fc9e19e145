"""`cvb_engine.run_ids`: one run-id rule for the CLI, the results file and the studio."""

from __future__ import annotations

import argparse

import pytest

from cvb_engine.run_ids import (
    RUN_ID_RULE,
    RunIdError,
    check_run_id,
    new_run_id,
    run_id_arg,
    run_id_problem,
)

ACCEPTED = [
    pytest.param(new_run_id(), id="default-id"),
    pytest.param("run-20250101-120000-ab12", id="default-shape"),
    pytest.param("r", id="one-character"),
    pytest.param("results-r1", id="studio-test-id"),
    pytest.param("demo-local", id="demo"),
    pytest.param("a.b_c-1", id="dot-underscore-dash"),
    pytest.param("A" * 80, id="80-characters"),
]
REFUSED = [
    pytest.param("", id="empty"),
    pytest.param("A" * 81, id="81-characters"),
    pytest.param("-x", id="starts-with-dash"),
    pytest.param(".hidden", id="starts-with-dot"),
    pytest.param("a b", id="space"),
    pytest.param("../etc", id="path"),
    pytest.param("a/b", id="slash"),
    pytest.param("ok\n", id="trailing-newline"),
    pytest.param("é", id="non-ascii"),
    pytest.param("\x1b]0;pwned\x07", id="escape-sequence"),
    pytest.param("abc\u202e", id="bidi-override"),
    pytest.param("=1+1", id="formula"),
]


@pytest.mark.parametrize("run_id", ACCEPTED)
def test_accepted(run_id: str) -> None:
    assert run_id_problem(run_id) is None
    assert check_run_id(run_id, "--run-id") == run_id
    assert run_id_arg(run_id) == run_id


@pytest.mark.parametrize("run_id", REFUSED)
def test_refused_with_the_rule_and_the_field(run_id: str) -> None:
    assert run_id_problem(run_id) == RUN_ID_RULE
    with pytest.raises(RunIdError) as raised:
        check_run_id(run_id, "results.json: run.id")
    message = str(raised.value)
    assert message.startswith(f"results.json: run.id: {RUN_ID_RULE}; found ")
    assert "\x1b" not in message and "\u202e" not in message and "\n" not in message
    with pytest.raises(argparse.ArgumentTypeError):
        run_id_arg(run_id)


@pytest.mark.parametrize("value", [None, 3, ["r"]], ids=["none", "int", "list"])
def test_a_run_id_that_is_not_text_is_refused(value: object) -> None:
    with pytest.raises(RunIdError, match=f"run.id: {RUN_ID_RULE}; found {type(value).__name__}"):
        check_run_id(value, "run.id")


def test_the_runner_itself_refuses_a_bad_run_id() -> None:
    """Runs started from Python (the studio's launcher, scripts) meet the same rule as the CLI."""
    from cvb_engine.runner import BenchmarkRun, RunError, RunOptions

    with pytest.raises(RunError, match="run_id: a run id is 1–80"):
        BenchmarkRun(RunOptions(run_id="bad id\x1b]0;t\x07", base_url="http://127.0.0.1:9"))


@pytest.mark.parametrize(
    ("run_id", "stem"),
    [
        pytest.param("groq-2026-11", "groq-2026-11", id="valid-kept"),
        pytest.param("../../etc/passwd", None, id="traversal"),
        pytest.param("a/b", None, id="slash"),
        pytest.param("x" * 81, None, id="too-long"),
        pytest.param("", None, id="empty"),
        pytest.param(7, None, id="not-text"),
    ],
)
def test_file_stem_names_files_from_checked_ids_only(run_id: object, stem: str | None) -> None:
    from cvb_engine.run_ids import file_stem, run_id_problem

    got = file_stem(run_id)
    assert run_id_problem(got) is None and "/" not in got
    assert got == stem if stem is not None else got.startswith("run-") and got != run_id
    assert file_stem(run_id) == got  # the same id, the same name


@pytest.mark.parametrize(
    ("scenario_id", "ok"),
    [
        pytest.param("library-choice-1", True, id="valid"),
        pytest.param("he-000-close-elements", True, id="ivr"),
        pytest.param("../x", False, id="traversal"),
        pytest.param("*", False, id="glob"),
        pytest.param("a--b", False, id="double-hyphen"),
        pytest.param("A-b", False, id="uppercase"),
        pytest.param("a" * 121, False, id="too-long"),
        pytest.param(None, False, id="none"),
    ],
)
def test_scenario_id_rule(scenario_id: object, ok: bool) -> None:
    from cvb_engine.run_ids import scenario_id_problem

    assert (scenario_id_problem(scenario_id) is None) is ok
