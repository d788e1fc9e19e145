"""The results file as typed models: what ``cvb report --json`` writes and ``cvb report
FILE.json`` reads (the fields are described in :mod:`cvb_engine.results`).

:class:`ResultsFile` is the whole file; :class:`ConstraintEntry` and :class:`CheckEntry`
are the one serialisation of a verdict, whether it comes fresh from scoring
(:meth:`ConstraintEntry.of_checks`, from :mod:`cvb_engine.scoring`) or back from the store (:func:`cvb_engine.results.export_results`).
The writer builds the file through these models and the reader validates with them,
strictly (no coercion: ``"1"`` is not a rep, ``1`` is not ``true``). Every field but a
record's cell and status is optional, so that a ``cvb-results/1`` file, written before
the later fields existed, reads.

The published JSON Schema (``docs/results-schema.json``, checked by a test) is
:func:`json_schema`; regenerate it with ``python -m cvb_engine.results_format
docs/results-schema.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic import model_validator as _model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from cvb_engine.agent.trace import AgentTrace
from cvb_engine.extract import Outcome
from cvb_engine.kinds import ErrorKind, RecordStatus
from cvb_engine.memory_trace import Delivery, Trace
from cvb_engine.run_ids import RunIdError, check_run_id, scenario_id_problem
from cvb_engine.safe_text import terminal_text

if TYPE_CHECKING:
    from cvb_engine.checks.base import CheckResult

__all__ = [
    "READABLE_FORMATS",
    "RESULTS_FORMAT",
    "CheckEntry",
    "ConstraintEntry",
    "IvrEntry",
    "RecordEntry",
    "ResultsFile",
    "RunInfo",
    "ToolUseEntry",
    "describe_error",
    "json_schema",
]

RESULTS_FORMAT = "cvb-results/2"
#: Formats `cvb report FILE.json` reads: 1 has no outcomes (its records count as answered).
READABLE_FORMATS = ("cvb-results/1", "cvb-results/2")
Format = Literal["cvb-results/1", "cvb-results/2"]

# strict: a reader takes the file's values as they are; extra fields are ignored (a newer
# writer's addition does not stop an older reader).
_CONFIG = ConfigDict(strict=True, extra="ignore", use_attribute_docstrings=True)


#: What a file being read may hold (README: Results file). A name (model, arm, category,
#: constraint or check id, prompt version …) up to MAX_NAME characters, a text (response,
#: code, reasoning, an error or a reason) up to MAX_TEXT; counts and positions 0 to
#: MAX_COUNT; other numbers finite, within ±MAX_NUMBER; at most MAX_ITEMS constraints per
#: record and evidence spans per check. A file that holds more is refused, naming the field.
MAX_NAME = 500
MAX_TEXT = 4_000_000
MAX_COUNT = 10**12
MAX_NUMBER = 1e12
MAX_ITEMS = 10_000
_TEXTS = frozenset({"response", "code", "reasoning", "error", "reason"})


def _problem_with(name: str, value: object) -> str | None:
    if isinstance(value, str):
        limit = MAX_TEXT if name in _TEXTS else MAX_NAME
        return f"longer than {limit:,} characters" if len(value) > limit else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if 0 <= value <= MAX_COUNT else f"expected 0 to {MAX_COUNT:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            return f"expected a finite number within ±{MAX_NUMBER:g}"
        return None
    if isinstance(value, list | dict) and len(value) > MAX_ITEMS and name != "records":
        return f"more than {MAX_ITEMS:,} items"
    if isinstance(value, dict) and name == "constraints":
        for key in value:
            if len(key) > MAX_NAME:
                return f"a constraint id longer than {MAX_NAME:,} characters"
    if isinstance(value, list):
        for item in value:
            if isinstance(item, int | float | str) and (problem := _problem_with(name, item)):
                return problem
    return None


class _Model(BaseModel):
    model_config = _CONFIG

    @_model_validator(mode="after")
    def _bounded(self, info: ValidationInfo) -> _Model:
        # Only for a file being read: a store's own export is written as it is stored.
        if (info.context or {}).get(READING):
            for name in type(self).model_fields:
                problem = _problem_with(name, getattr(self, name))
                if problem is not None:
                    raise _field_problem(name, problem)
        return self


class Span(_Model):
    """A stretch of the checked text: 1-based line, 0-based column, length in characters."""

    line: int
    col: int
    length: int


class CheckEntry(_Model):
    """One check's verdict on one record."""

    id: str
    kind: str
    passed: bool
    reason: str
    scope: str = "code"
    """Which text the evidence spans point into: ``code`` (the extracted code) or ``response``."""
    evidence: list[Span] = []
    """The spans that triggered the verdict; empty when nothing specific is to blame."""

    @classmethod
    def of(cls, check_id: str, kind: str, result: CheckResult) -> CheckEntry:
        """The entry of a check's result."""
        return cls(
            id=check_id,
            kind=kind,
            passed=result.passed,
            reason=result.reason,
            scope=result.scope,
            evidence=[Span(line=s.line, col=s.col, length=s.length) for s in result.evidence],
        )


class ConstraintEntry(_Model):
    """One constraint's verdict on one record: honored when every check passed."""

    honored: bool
    checks: list[CheckEntry] = []

    @classmethod
    def of_checks(cls, checks: Iterable[CheckEntry]) -> ConstraintEntry:
        """The entry of a constraint's checks, in order."""
        listed = list(checks)
        return cls(honored=all(c.passed for c in listed), checks=listed)


class Usage(_Model):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _any_object(value: object) -> object:
    # The trace as stored: a reader validates it where it reads it
    # (cvb_engine.memory_trace.read_trace: another shape is "unavailable"), so the file
    # carries it unchanged; the schema shows the shape a writer gives it.
    if value is None or isinstance(value, dict):
        return value
    raise PydanticCustomError("trace_type", "expected an object or null")


MemoryTrace = Annotated[
    dict[str, Any] | None,
    PlainValidator(_any_object, json_schema_input_type=Trace | Delivery | None),
]


AgentTraceValue = Annotated[
    dict[str, Any] | None, PlainValidator(_any_object, json_schema_input_type=AgentTrace | None)
]


class RecordEntry(_Model):
    """One cell of the matrix: a model's answer to one scenario under one arm, and its
    verdicts. An error record carries no ``constraints``, ``strict`` nor ``outcome``."""

    model: str
    scenario_id: str
    scenario_version: int | None = None
    category: str
    arm: str
    rep: int
    status: RecordStatus
    error: str | None = None
    response: str | None = None
    code: str | None = None
    latency_s: float | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    attempts: int | None = None
    outcome: Outcome | None = None
    """``answered``, ``unparseable`` or ``no-code``; null for a record scored before
    outcomes existed (scoring version 1) and for an error record."""
    truncated: bool | None = None
    """The endpoint cut the reply at max_tokens (``finish_reason`` ``length``)."""
    reasoning: str | None = None
    """The endpoint's separate reasoning field, never scored."""
    response_cut: bool | None = None
    """cvb stored the reply cut at ``--max-response-chars``; null before cuts existed."""
    error_kind: ErrorKind | None = None
    """What failed for an error record: the endpoint (``api``; also when absent) or the
    memory layer (``memory``); null for an ok record."""
    memory: MemoryTrace = None
    """The memory trace as stored (:mod:`cvb_engine.memory_trace`): a memory layer's trace
    (memory, memory-tool), or an incentivized ``stale=`` / ``budget=`` variant's delivery
    flags per constraint (:class:`~cvb_engine.memory_trace.Delivery`); null for other arms.
    An object of another shape reads as unavailable."""
    agent: AgentTraceValue = None
    """The agent episode as stored (:class:`cvb_engine.agent.trace.AgentTrace`: transcript,
    files written, steps, tokens, per-constraint read flags); null for the other arms. An
    object of another shape reads as unavailable."""
    worker: str | None = None
    """The runner that stored the record (``cvb run --worker``); null before runners had
    names."""
    scoring_version: int | None = None
    """The scoring rules that judged the record; null is version 1."""
    constraints: dict[str, ConstraintEntry] | None = None
    """Constraint id → its verdict, for an ok record."""
    strict: bool | None = None
    """Every constraint honored (an ok record; null: an answer not scored yet, which a
    report counts apart from the scored ones)."""
    stated_passed: bool | None = None
    """The stated test's verdict (IVR problems)."""
    prompt_version: str | None = None
    messages_sha256: str | None = None
    scenario_sha256: str | None = None

    @_model_validator(mode="after")
    def _scored_when_ok(self, info: ValidationInfo) -> RecordEntry:
        if self.status == RecordStatus.OK and self.constraints is None:
            raise _field_problem("constraints", "expected an object of {honored: bool}")
        if (info.context or {}).get(READING) and scenario_id_problem(self.scenario_id):
            raise _field_problem("scenario_id", f"{scenario_id_problem(self.scenario_id)}")
        return self


#: The validation context of a file being read: ``{READING: True}``.
READING = "reading"


class RunInfo(_Model):
    id: str | None = None
    """The run's id (:mod:`cvb_engine.run_ids`)."""
    started: str | None = None
    """When the run was created, ISO 8601 with its offset (UTC)."""
    params: dict[str, Any] | None = None
    """The parameters it was sent with (models, scenarios, arms, runs, temperature, ...)."""

    @field_validator("id", mode="before")
    @classmethod
    def _valid_run_id(cls, value: object, info: ValidationInfo) -> object:
        # Checked when a file is read (READING context); a store may hold ids from before
        # ids were checked, and a file written from it keeps them (shown safely).
        if not (info.context or {}).get(READING):
            return value
        try:
            return check_run_id(value, "run.id")
        except RunIdError as exc:  # its message names the field and shows the value safely
            raise PydanticCustomError("run_id", "{message}", {"message": str(exc)}) from None


class RateEntry(_Model):
    strict: float | None
    ci95: list[float | None]
    k: int
    n: int


class ProblemCount(_Model):
    violating: int
    stated_passed: int


class FailureCount(_Model):
    failed: int
    of: int


class IvrEntry(_Model):
    """IVR of one model × arm (:func:`cvb_engine.report.ivr_dict`); a reader recomputes it."""

    model: str
    arm: str
    ivr: float | None
    ivr_ci95: list[float | None]
    stated_pass_rate: float | None
    n_solutions: int
    n_stated_passed: int
    qualifying_problems: int
    share_at_0_or_1: float | None
    per_problem: dict[str, ProblemCount]
    constraint_failure: dict[str, FailureCount]
    excluded: list[str]


class ToolUseEntry(_Model):
    """How one model used the memory tool under one memory-tool variant
    (:func:`cvb_engine.report.tool_use_dict`); a reader recomputes it."""

    model: str
    arm: str
    layer: str | None
    records: int
    trace_unavailable: int
    looked_up: int
    looked_up_share: float | None
    tool_calls: int
    calls_per_record: float | None
    lookups: int
    lookups_holding_a_constraint: int
    held_share: float | None
    when_looked_up: RateEntry
    when_not_looked_up: RateEntry
    when_a_constraint_came_back: RateEntry


class AgentRateEntry(_Model):
    value: float | None
    ci95: list[float | None]
    k: int
    n: int


class AgentGapEntry(_Model):
    value: float | None
    ci95: list[float | None]
    scenarios: int


class AgentEntry(_Model):
    """Read versus obeyed for one model under one agent variant
    (:func:`cvb_engine.report.export.agent_dict`); a reader recomputes it."""

    model: str
    arm: str
    episodes: int
    error_records: int
    trace_unavailable: int
    strict: AgentRateEntry
    per_constraint: AgentRateEntry
    gap_to_mandated: AgentGapEntry
    read: int
    read_share: float | None
    read_every_constraint: int
    rules_in_system_message: int
    reads_not_observed: int
    strict_when_read: AgentRateEntry
    strict_when_not_read: AgentRateEntry
    per_constraint_when_read: AgentRateEntry
    per_constraint_when_not_read: AgentRateEntry
    steps: int
    steps_per_episode: float | None
    tool_calls: int
    refused_calls: int
    episodes_with_refusals: int
    tokens: int | None
    tokens_per_episode: float | None
    episodes_without_file: int
    ended: dict[str, int]


class ResultsFile(_Model):
    """A results file (``cvb-results/2``; ``cvb-results/1`` is read too)."""

    model_config = ConfigDict(title="cvb-results")

    format: Format
    prompt_version: str | None = None
    run: RunInfo | None = None
    records: list[RecordEntry]
    ivr: list[IvrEntry] | None = None
    """Written when the run has IVR problems."""
    memory_tool: list[ToolUseEntry] | None = None
    """Written when the run has memory-tool arms."""
    memory_realism: dict[str, list[dict[str, Any]]] | None = None
    """Written when the run has stale= or budget= variants: ``stale`` (strict accuracy with
    and without the superseded notes, and the drop) and ``delivery`` (honored when a note
    was delivered and when not), from :func:`cvb_engine.report.memory_realism.realism_dict`;
    a reader recomputes them from the records (each record's ``memory`` holds its
    per-constraint ``delivered`` flags)."""
    agent_summary: list[AgentEntry] | None = None
    """Written when the run has agent variants: read versus obeyed per model × variant."""

    def as_json(self) -> dict[str, Any]:
        """The file's JSON value; the summaries are left out when the run has none."""
        absent = {
            name
            for name in ("ivr", "memory_tool", "memory_realism", "agent_summary")
            if getattr(self, name) is None
        }
        return self.model_dump(mode="json", exclude=absent)


def _field_problem(name: str, problem: str) -> PydanticCustomError:
    return PydanticCustomError(
        "field_problem", "{field}: {problem}", {"field": name, "problem": problem}
    )


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the results file (``docs/results-schema.json``)."""
    schema = ResultsFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


# --------------------------------------------------------------------------- errors

_EXPECTED = {
    "string_type": "expected str",
    "int_type": "expected int",
    "bool_type": "expected true or false",
    "float_type": "expected a number",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past Python's int-string limit (4,300 digits)
        return "an integer of more than 4,300 digits"
    return terminal_text(text if len(text) <= 100 else text[:100] + "…", multiline=False)


def describe_error(error: ErrorDetails) -> str:
    """One validation error as ``field: problem`` (``records[3].rep: expected int, found
    '1'``), the field as a path into the file."""
    where = _where(tuple(error["loc"]))
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "field_problem":
        return f"{where}.{ctx['field']}: {ctx['problem']}"
    if kind == "missing":
        return f"{where}: missing"
    if kind in ("literal_error", "enum"):
        problem = f"expected one of {ctx.get('expected', '')}"
    elif kind == "run_id":
        return str(ctx["message"])
    else:
        problem = _EXPECTED.get(kind, error["msg"])
    return f"{where}: {problem}, found {_shown(error['input'])}"


def first_problem(exc: ValidationError) -> str:
    """The first error of ``exc`` (in the file's field order), described."""
    return describe_error(exc.errors(include_url=False)[0])


def main(argv: list[str] | None = None) -> int:
    """``python -m cvb_engine.results_format [PATH]``: write the schema to PATH or stdout."""
    args = sys.argv[1:] if argv is None else argv
    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
