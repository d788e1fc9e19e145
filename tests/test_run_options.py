"""Run options are one typed model: the CLI parses into it, the Run page launches it as a
command line that parses back into the same options, and a launch's sidecar reads back."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cvb_engine.cli.run import add_run_arguments, options_from_args
from cvb_engine.lifecycle import Launch, run_arguments
from cvb_engine.run_options import DEFAULT_OPTIONS, MATRIX_OPTIONS, RunOptions, flag


def parse(argv: list[str]) -> RunOptions:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(argv))


def test_the_cli_defaults_are_the_models() -> None:
    assert parse([]) == DEFAULT_OPTIONS.changed(given=frozenset())
    assert parse([]).given_matrix() == frozenset()


def test_every_option_has_a_cvb_run_flag() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    flags = set(parser._option_string_actions)
    missing = [n for n in RunOptions.model_fields if n != "given" and flag(n) not in flags]
    assert missing == []
    assert set(MATRIX_OPTIONS) <= set(RunOptions.model_fields)


ROUND_TRIPS: dict[str, dict[str, Any]] = {
    "defaults": {"run_id": "r1"},
    "page": {
        "scenarios": "/lib/scenarios",
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key_env": "MY_KEY",
        "run_id": "run-20261202-101010-abcd",
        "models": ("m-a", "m-b"),
        "categories": ("code-style", "security"),
        "arms": ("cold", "incentivized@load=50,channel=system", "memory@layer=bm25"),
        "runs": 2,
        "temperature": 0.7,
        "max_tokens": 300,
        "concurrency": 3,
        "timeout_s": 12.5,
        "max_attempts": 2,
        "note": "a note, with spaces",
        "retry_errors": True,
    },
    "everything-else": {
        "only": ("s-1", "s-2"),
        "seed": None,
        "memory_sweep": ("load=0,10", "position=start,end"),
        "retry_after_cap_s": 5.0,
        "max_response_chars": 999,
        "sandbox": "unshare",
        "join": True,
        "run_id": "joined",
        "worker": "w-1",
        "lease_s": 2.5,
        "api_key_env": "",
    },
}


@pytest.mark.parametrize("fields", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_a_launch_command_line_parses_back_into_its_options(fields: dict[str, Any]) -> None:
    options = RunOptions(**fields)
    back = parse(run_arguments(options))
    assert back.changed(given=None) == options


def test_the_command_line_never_carries_the_store() -> None:
    """A database URL may hold a password: a launch passes it in the environment."""
    options = RunOptions(run_id="r", db="postgresql://u:hunter2@db/cvb")
    assert not any("hunter2" in a for a in run_arguments(options))


def test_options_are_typed_and_frozen() -> None:
    with pytest.raises(ValidationError, match="runs"):
        RunOptions(runs="three")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="colour"):
        RunOptions(colour="red")  # type: ignore[call-arg]
    options = RunOptions(models=["a"], memory_sweep=None)  # type: ignore[arg-type]
    assert options.models == ("a",) and options.memory_sweep == ()
    with pytest.raises(ValidationError):
        options.runs = 2  # type: ignore[misc]
    assert options.changed(runs=2).runs == 2 and options.runs == 3
    with pytest.raises(ValidationError, match="max_tokens"):
        options.changed(max_tokens="many")


def test_a_launch_sidecar_reads_back_as_its_options(tmp_path: Path) -> None:
    options = RunOptions(run_id="r", base_url="http://h/v1", api_key_env="K", models=("m",))
    launch = Launch(
        run_id="r",
        pid=1,
        host="h",
        started="2026-12-02T10:00:00+00:00",
        action="launch",
        command="cvb run ...",
        log=str(tmp_path / "r.log"),
        spec=json.loads(json.dumps(options.model_dump(mode="json"))),
    )
    assert launch.launch_spec() == options
    # an older studio's sidecar: the same names, lists for tuples
    older = {"scenarios": "s", "base_url": "u", "api_key_env": "K", "run_id": "r", "arms": ["cold"]}
    assert Launch(**{**launch.__dict__, "spec": older}).launch_spec() == RunOptions(
        scenarios="s", base_url="u", api_key_env="K", run_id="r", arms=("cold",)
    )
    # edited or from a future version: not started again from it
    for bad in ({"runs": "x"}, {"unknown_option": 1}):
        assert Launch(**{**launch.__dict__, "spec": {**older, **bad}}).launch_spec() is None
