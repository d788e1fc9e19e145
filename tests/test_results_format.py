"""The results file's models: the published schema, what the reader takes and refuses,
and one serialisation of a verdict (fresh from scoring or back from the store)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cvb_engine.checks.base import CheckResult, Span
from cvb_engine.kinds import ErrorKind, RecordStatus, RunnerStatus, RunStatus, SeedArm
from cvb_engine.results import ResultsFileError, load_results_file
from cvb_engine.results_format import CheckEntry, ConstraintEntry, json_schema
from cvb_engine.scenario import ARMS
from cvb_engine.scoring import CheckVerdict, ConstraintVerdict

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "results-schema.json"


def test_the_published_schema_is_the_models_schema() -> None:
    published = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert published == json_schema(), (
        "docs/results-schema.json is out of date: "
        "python -m cvb_engine.results_format docs/results-schema.json"
    )


def _record(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "m",
        "scenario_id": "s",
        "category": "c",
        "arm": "mandated",
        "rep": 0,
        "status": "ok",
        "strict": True,
        "constraints": {"c1": {"honored": True}},
    }
    return {k: v for k, v in {**base, **fields}.items() if v is not ...}


def _file(*records: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"format": "cvb-results/2", "records": list(records), **top}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_file(_record()), id="minimal"),
        pytest.param({**_file(_record()), "format": "cvb-results/1"}, id="format-1"),
        pytest.param(
            _file(_record(status="error", strict=..., constraints=..., error="boom")),
            id="error-record-without-scores",
        ),
        pytest.param(
            _file(_record(status="error", strict=None, constraints=None, error_kind="memory")),
            id="memory-failure",
        ),
        pytest.param(
            _file(_record(memory={"not": "a trace"}, outcome=None, extra_field=[1])),
            id="unreadable-trace-and-unknown-field",
        ),
        pytest.param(_file(_record(), run={"id": "r1", "params": {"runs": 1}}), id="run"),
        pytest.param(_file(_record(strict=None, constraints={})), id="answer-not-scored-yet"),
    ],
)
def test_the_reader_takes_every_file_a_writer_gave(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_results_file(path) == data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "top level: expected an object", id="top"),
        pytest.param({"format": "x", "records": []}, "format: expected one of", id="format"),
        pytest.param({"format": "cvb-results/2"}, "records: missing", id="no-records"),
        pytest.param(
            _file(_record(model=3)), "records[0].model: expected str, found 3", id="model"
        ),
        pytest.param(_file(_record(rep=True)), "records[0].rep: expected int", id="rep-bool"),
        pytest.param(_file(_record(status="gone")), "records[0].status: expected", id="status"),
        pytest.param(_file(_record(strict="yes")), "records[0].strict: expected true", id="strict"),
        pytest.param(
            _file(_record(constraints=None)),
            "records[0].constraints: expected an object",
            id="cons",
        ),
        pytest.param(
            _file(_record(constraints={"c1": {"honored": "yes"}})),
            "records[0].constraints.c1.honored: expected true or false",
            id="honored",
        ),
        pytest.param(
            _file(_record(outcome="maybe")), "records[0].outcome: expected one of", id="outcome"
        ),
        pytest.param(_file(_record(), run={"id": "../x"}), "run.id: a run id is", id="run-id"),
        pytest.param(_file(_record(), run=[]), "run: expected an object", id="run"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, data: object, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResultsFileError) as caught:
        load_results_file(path)
    assert str(caught.value).startswith(f"{path}: {message}"), str(caught.value)


def test_a_fresh_verdict_serialises_as_the_file_has_it() -> None:
    failed = CheckResult(False, "eval called", (Span(3, 4, 4),))
    verdict = ConstraintVerdict(
        "no-eval",
        (CheckVerdict("a", "regex", CheckResult(True, "ok")), CheckVerdict("b", "ast", failed)),
    )
    entry = ConstraintEntry.of_checks(
        CheckEntry.of(c.check_id, c.kind, c.result) for c in verdict.checks
    )
    assert verdict.as_dict() == entry.model_dump(mode="json")
    assert verdict.as_dict() == {
        "honored": False,
        "checks": [
            {"id": "a", "kind": "regex", "passed": True, "reason": "ok"}
            | {"scope": "code", "evidence": []},
            {"id": "b", "kind": "ast", "passed": False, "reason": "eval called"}
            | {"scope": "code", "evidence": [{"line": 3, "col": 4, "length": 4}]},
        ],
    }


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        pytest.param(SeedArm, ("cold", "mandated", "incentivized"), id="seed-arm"),
        pytest.param(RecordStatus, ("ok", "error"), id="record-status"),
        pytest.param(ErrorKind, ("api", "memory"), id="error-kind"),
        pytest.param(
            RunStatus,
            ("created", "running", "finished", "incomplete", "cancelled", "failed"),
            id="run-status",
        ),
        pytest.param(
            RunnerStatus, ("running", "finished", "cancelled", "failed", "died"), id="runner"
        ),
    ],
)
def test_stored_vocabularies_keep_their_strings(kind: Any, values: tuple[str, ...]) -> None:
    assert tuple(kind) == values and all(member == member.value for member in kind)


def test_the_seed_arms_are_plain_strings_where_they_flow_into_stored_data() -> None:
    assert tuple(SeedArm) == ARMS and all(type(a) is str for a in ARMS)
