"""The run lifecycle: resuming a stored run rebuilds its matrix from its parameters, and a
run whose parameters an older cvb stored incomplete (schema 6 marks it) is refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from cvb_engine.lifecycle import LaunchError, resume_run, retry_errors, spec_from_run
from cvb_engine.monitor import run_progress
from cvb_engine.store import Run, dispose_engines, get_engine

WHOLE = {
    "models": ["m"],
    "arms": ["cold", "mandated"],
    "runs": 1,
    "max_tokens": 700,
    "temperature": 0.0,
    "seed": 7,
    "scenarios": {"reset-token-generator": {}, "http-client-choice": {}},
    "base_url": "http://127.0.0.1:9/v1",
    "api_key_env": "",
}


def store_run(url: str, params: dict[str, object], *, legacy: bool | None) -> None:
    with Session(get_engine(url)) as session:
        session.add(
            Run(
                id="old",
                prompt_version="2.0",
                params_json=json.dumps(params),
                total_cells=4,
                status="cancelled",
                legacy_params=legacy,
            )
        )
        session.commit()


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'cvb.db'}"
    dispose_engines()


@pytest.mark.parametrize("again", [resume_run, retry_errors], ids=["resume", "retry"])
def test_a_legacy_run_is_refused_with_what_to_do(
    url: str, tmp_path: Path, again: Callable[..., Any]
) -> None:
    store_run(url, {k: v for k, v in WHOLE.items() if k != "max_tokens"}, legacy=True)
    with Session(get_engine(url)) as session:
        progress = run_progress(session, "old")
    assert progress is not None
    with pytest.raises(LaunchError, match=r"older cvb.*same --run-id"):
        again(progress, db_url=url, logs=tmp_path / "logs", scenarios_fallback=tmp_path)
    assert not (tmp_path / "logs" / "old.log").exists()  # nothing was started


def test_a_whole_run_is_resumed_with_its_own_matrix(tmp_path: Path) -> None:
    spec = spec_from_run("old", WHOLE, scenarios_fallback=tmp_path)
    assert spec.only == ("http-client-choice", "reset-token-generator")
    assert (spec.max_tokens, spec.seed, spec.arms, spec.models) == (
        700,
        7,
        ("cold", "mandated"),
        ("m",),
    )
