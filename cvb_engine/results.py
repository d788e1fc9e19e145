"""Records in and out: scores into the store, tallies out of it, and the results file.

The results file (``cvb-results/2``) is the interchange format (README: Results file)::

    {"format": "cvb-results/2", "prompt_version": "2.0",
     "run": {"id": ..., "started": ..., "params": {...}},
     "records": [{"model", "scenario_id", "scenario_version", "category", "arm", "rep",
                  "status", "error", "response", "code", "latency_s", "usage",
                  "finish_reason", "outcome", "truncated", "reasoning", "scoring_version",
                  "response_cut", "error_kind", "memory", "worker",
                  "constraints": {cid: {"honored", "checks": [...]}}, "strict",
                  "stated_passed", ...provenance}],
     "ivr": [...], "memory_tool": [...]}

An error record (``status: "error"``) carries no ``constraints``, no ``strict``
and no ``outcome``. ``outcome`` is ``answered`` | ``unparseable`` | ``no-code``
(null for a record scored before outcomes existed, scoring version 1);
``reasoning`` is the endpoint's separate reasoning field, never scored.
``response_cut`` says cvb stored the reply cut at ``--max-response-chars``
(true), or not (false; null for records stored before cuts existed); an
optional field, so files without it read as before.
``error_kind`` says what failed for an error record: ``"api"`` (the endpoint)
or ``"memory"`` (the memory layer of a ``memory`` / ``memory-tool`` arm: never
an API failure, never a violation); null for an ok record. ``memory`` is the
record's memory trace as stored (:mod:`cvb_engine.memory_trace`: the layer, the
context or every tool call and result), null for arms without a layer. Both are
optional fields: a file without them reads as before (every error an API failure).
``worker`` names the runner that stored the record (``cvb run --worker``; null before
runners had names).
``ivr`` and ``memory_tool`` (how each model used the memory tool, per memory-tool
variant: :func:`cvb_engine.report.export.tool_use_dict`) are summaries written when the
run has IVR problems or memory-tool arms; a reader recomputes them from the records.
``cvb-results/1`` (the same without the four new fields) is still read.

The file's models, and the JSON Schema published from them (``docs/results-schema.json``),
are in :mod:`cvb_engine.results_format`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import case, func, insert, or_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, delete, select

from cvb_engine.extract import OUTCOMES, Outcome
from cvb_engine.kinds import ErrorKind, RecordStatus
from cvb_engine.memory_trace import trace_value
from cvb_engine.metrics import (
    BOOTSTRAP_SEED,
    ConstraintTally,
    RecordRow,
    Summary,
    Tally,
    ivr,
    layer_names,
    summarize,
    tool_use,
)
from cvb_engine.report.export import agent_dict, ivr_dict, realism_dict, tool_use_dict
from cvb_engine.results_format import (
    READING,
    RESULTS_FORMAT,
    AgentEntry,
    CheckEntry,
    ConstraintEntry,
    IvrEntry,
    RecordEntry,
    ResultsFile,
    RunInfo,
    ToolUseEntry,
    Usage,
    first_problem,
)
from cvb_engine.scoring import Scored
from cvb_engine.store import (
    CheckOutcome,
    ConstraintResult,
    Record,
    Run,
    as_utc,
    score_rows,
)


class ResultsFileError(ValueError):
    """A results file that cannot be read; the message names the file and the field."""


def save_scores(session: Session, record: Record, scored: Scored, *, fresh: bool = False) -> None:
    """Write ``scored`` onto ``record``, replacing earlier scores. Does not commit.

    ``fresh`` says the record was just inserted and has no scores to delete
    (two DELETEs fewer per record).
    """
    assert record.id is not None, "flush the record before scoring it"
    if not fresh:
        session.exec(delete(CheckOutcome).where(col(CheckOutcome.record_id) == record.id))
        session.exec(delete(ConstraintResult).where(col(ConstraintResult.record_id) == record.id))
    record_values, constraint_rows, check_rows = score_rows(record.id, scored)
    # Core executemany instead of ORM objects: the unit of work costs more than
    # the scoring itself.
    if constraint_rows:
        session.execute(insert(ConstraintResult), constraint_rows)
    if check_rows:
        session.execute(insert(CheckOutcome), check_rows)
    for name, value in record_values.items():
        setattr(record, name, value)
    session.add(record)


def constraint_details(
    session: Session, record_ids: list[int]
) -> dict[int, dict[str, ConstraintEntry]]:
    """The ``constraints`` of the results file for each record id, from the stored checks."""
    checks: dict[int, dict[str, list[CheckEntry]]] = {rid: {} for rid in record_ids}
    for chunk_start in range(0, len(record_ids), 500):
        chunk = record_ids[chunk_start : chunk_start + 500]
        outcomes = session.exec(
            select(CheckOutcome)
            .where(col(CheckOutcome.record_id).in_(chunk))
            .order_by(col(CheckOutcome.record_id), col(CheckOutcome.id))
        )
        for o in outcomes:
            checks[o.record_id].setdefault(o.constraint_id, []).append(
                CheckEntry.model_validate(
                    {
                        "id": o.check_id,
                        "kind": o.kind,
                        "passed": o.passed,
                        "reason": o.reason,
                        "scope": o.scope,
                        "evidence": o.evidence,
                    }
                )
            )
    return {
        rid: {cid: ConstraintEntry.of_checks(listed) for cid, listed in by_constraint.items()}
        for rid, by_constraint in checks.items()
    }


def record_entry(record: Record, constraints: dict[str, ConstraintEntry] | None) -> RecordEntry:
    """A stored record as the results file has it (an error record without its scores)."""
    ok = record.status == RecordStatus.OK
    return RecordEntry(
        model=record.model,
        scenario_id=record.scenario_id,
        scenario_version=record.scenario_version,
        category=record.category,
        arm=record.arm,
        rep=record.rep,
        status=RecordStatus(record.status),
        error=record.error,
        response=record.response,
        code=record.code,
        latency_s=record.latency_s,
        usage=Usage(prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens),
        finish_reason=record.finish_reason,
        attempts=record.attempts,
        outcome=_outcome(record.outcome) if ok else None,
        truncated=bool(record.truncated) if ok and record.truncated is not None else None,
        reasoning=record.reasoning,
        response_cut=record.response_cut,
        error_kind=None if ok else ErrorKind(record.error_kind or ErrorKind.API),
        memory=_object_or_none(trace_value(record.memory_json)),
        agent=_object_or_none(trace_value(record.agent_json)),
        worker=record.worker,
        scoring_version=record.scoring_version if ok else None,
        constraints=(constraints or {}) if ok else None,
        strict=record.strict if ok else None,
        stated_passed=record.stated_passed if ok else None,
        prompt_version=record.prompt_version,
        messages_sha256=record.messages_sha256,
        scenario_sha256=record.scenario_sha256,
    )


def _outcome(value: str | None) -> Outcome | None:
    return next((o for o in OUTCOMES if o == value), None)


def _object_or_none(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def iter_run_records(session: Session, run_id: str, batch: int = 1000) -> Iterator[Record]:
    """Records of a run in matrix order, fetched in batches (bounded memory)."""
    last = 0
    while True:
        rows = list(
            session.exec(
                select(Record)
                .where(Record.run_id == run_id, col(Record.id) > last)
                .order_by(col(Record.id))
                .limit(batch)
            )
        )
        if not rows:
            return
        yield from rows
        last = rows[-1].id or last


def export_results(session: Session, run_id: str) -> dict[str, Any]:
    """The results file for one stored run, as its JSON value."""
    run = session.get(Run, run_id)
    if run is None:
        raise KeyError(run_id)
    records: list[RecordEntry] = []
    batch: list[Record] = []

    def flush() -> None:
        details = constraint_details(session, [r.id for r in batch if r.id is not None])
        records.extend(record_entry(r, details.get(r.id or -1)) for r in batch)
        batch.clear()

    for record in iter_run_records(session, run_id):
        batch.append(record)
        if len(batch) >= 500:
            flush()
    flush()
    records.sort(key=lambda r: (r.model, r.scenario_id, r.arm, r.rep))
    ivr_results = ivr(db_ivr_rows(session, [run_id]))
    memory_rows = db_memory_rows(session, [run_id])
    uses = tool_use(memory_rows)
    layers = layer_names({u.arm for u in uses}, memory_rows) if uses else {}
    agent = _agent_summary(session, run_id)
    realism = None
    if any("stale=" in r.arm or "budget=" in r.arm for r in records):
        realism = realism_dict(db_summary(session, [run_id]))
    results = ResultsFile(
        format=RESULTS_FORMAT,
        prompt_version=run.prompt_version,
        run=RunInfo(id=run.id, started=_iso(run.created), params=run.params),
        records=records,
        ivr=[IvrEntry.model_validate(d) for d in ivr_dict(ivr_results)] if ivr_results else None,
        memory_tool=[ToolUseEntry.model_validate(d) for d in tool_use_dict(uses, layers)]
        if uses
        else None,
        memory_realism=realism,
        agent_summary=[AgentEntry.model_validate(d) for d in agent] if agent else None,
    )
    return results.as_json()


def _agent_summary(session: Session, run_id: str) -> list[dict[str, Any]]:
    """The results file's ``agent_summary``: read versus obeyed per model × agent variant
    (:func:`cvb_engine.report.export.agent_dict`), empty for a run without agent variants."""
    from cvb_engine.agent.metrics import agent_stats, episode

    items = [episode(r) for r in db_agent_rows(session, [run_id])]
    if not items:
        return []
    tallies, _ = db_tallies(session, [run_id])
    return agent_dict(agent_stats(items, tallies=tallies))


def _iso(moment: datetime) -> str:
    return as_utc(moment).isoformat()


def _file_mode(target: Path) -> int:
    """The mode a report file gets: the one it has, else what ``open()`` would give
    (0666 less the umask): a temporary file is 0600, which a report to share is not."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        pass
    umask = 0o022
    try:  # read, not set-and-restore: os.umask() would race other threads (the studio)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o666 & ~umask


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON next to ``path`` and rename it into place (never a half-written file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
            os.fchmod(fh.fileno(), _file_mode(target))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            os.fchmod(fh.fileno(), _file_mode(target))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: The largest results file ``cvb report FILE`` reads (README: Results file): reading one
#: takes about 30 times its size in memory (the JSON value and its validation); set
#: ``CVB_MAX_RESULTS_MB`` to read a larger one on a machine that has the memory.
MAX_RESULTS_FILE_MB = 32
MAX_RESULTS_ENV = "CVB_MAX_RESULTS_MB"


def max_results_bytes() -> int:
    """The size limit in bytes: ``$CVB_MAX_RESULTS_MB`` when it is a positive number, else
    :data:`MAX_RESULTS_FILE_MB`."""
    raw = os.environ.get(MAX_RESULTS_ENV, "")
    try:
        mb = float(raw) if raw else MAX_RESULTS_FILE_MB
    except ValueError:
        mb = MAX_RESULTS_FILE_MB
    return int((mb if math.isfinite(mb) and mb > 0 else MAX_RESULTS_FILE_MB) * 2**20)


def load_results_file(path: str | Path) -> dict[str, Any]:
    """Read and validate a results file (:class:`~cvb_engine.results_format.ResultsFile`);
    errors name the file and the field. Returns the file's JSON value.

    A file past :func:`max_results_bytes` is refused before it is read; every value is
    checked on the way in (ids by their rules, names and texts bounded, numbers finite and
    bounded, :mod:`cvb_engine.results_format`): what is refused raises
    :class:`ResultsFileError` with a message, never another exception.
    """
    p = Path(path)
    limit = max_results_bytes()
    try:
        size = p.stat().st_size
        if size > limit:
            raise ResultsFileError(
                f"{p}: {size / 2**20:,.1f} MB; cvb reads results files up to "
                f"{limit / 2**20:,.0f} MB (set {MAX_RESULTS_ENV} to read a larger one)"
            )
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsFileError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{p}: not UTF-8 text ({exc.reason})") from None
    try:
        # Validated from the text first (strict JSON validation takes "ok" for
        # RecordStatus.OK), the models dropped before the JSON value is built: the two are
        # never in memory together.
        ResultsFile.model_validate_json(text, context={READING: True})
    except ValidationError as exc:
        if exc.errors(include_url=False)[0]["type"] == "json_invalid":
            _json_value(p, text)  # names the line of a syntax error
        raise ResultsFileError(f"{p}: {first_problem(exc)}") from None
    return _json_value(p, text)


def _json_value(p: Path, text: str) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise ResultsFileError(f"{p}: not valid JSON: {constant} is not a number")

    try:
        data = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{p}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ResultsFileError(f"{p}: not valid JSON: nested too deep") from None
    except ValueError:  # Python's int-string limit: a number of thousands of digits
        raise ResultsFileError(
            f"{p}: not valid results: a number of more than 4,300 digits"
        ) from None
    if not isinstance(data, dict):
        raise ResultsFileError(f"{p}: expected an object at the top level")
    return data


def rows_from_results(data: dict[str, Any]) -> list[RecordRow]:
    return [
        RecordRow(
            model=r["model"],
            scenario_id=r["scenario_id"],
            category=r["category"],
            arm=r["arm"],
            status=r["status"],
            strict=r.get("strict") if r["status"] == RecordStatus.OK else None,
            constraints={k: v["honored"] for k, v in (r.get("constraints") or {}).items()},
            stated_passed=r.get("stated_passed") if r["status"] == RecordStatus.OK else None,
            outcome=r.get("outcome"),
            truncated=bool(r.get("truncated")),
            error_kind=r.get("error_kind"),
            # read back as the text a store keeps: the trace is validated where it is read
            memory=_trace_text(r.get("memory")),
            agent=_trace_text(r.get("agent")),
        )
        for r in data["records"]
    ]


def _trace_text(value: object) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


def db_ivr_rows(session: Session, run_ids: Iterable[str]) -> list[RecordRow]:
    """The IVR problems' records as metric rows: named columns only, never response texts.

    Constraints keep their file order (the order their results were written),
    which :func:`cvb_engine.metrics.ivr` turns into the positions C2, C3, ….
    """
    ids = list(run_ids)
    if not ids:
        return []
    base = (
        sa_select(
            col(Record.id),
            col(Record.model),
            col(Record.scenario_id),
            col(Record.category),
            col(Record.arm),
            col(Record.status),
            col(Record.strict),
            col(Record.stated_passed),
            col(Record.outcome),
            col(Record.truncated),
        )
        .where(col(Record.run_id).in_(ids), col(Record.stated_passed).is_not(None))
        .order_by(col(Record.id))
    )
    records = session.execute(base).all()
    constraints: dict[int, dict[str, bool]] = {int(r[0]): {} for r in records}
    cstmt = (
        sa_select(
            col(ConstraintResult.record_id),
            col(ConstraintResult.constraint_id),
            col(ConstraintResult.honored),
        )
        .join(Record, col(Record.id) == col(ConstraintResult.record_id))
        .where(col(Record.run_id).in_(ids), col(Record.stated_passed).is_not(None))
        .order_by(col(ConstraintResult.id))
    )
    for rid, cid, ok in session.execute(cstmt):
        constraints[int(rid)][cid] = bool(ok)
    return [
        RecordRow(m, s, c, a, st, strict, constraints[int(rid)], sp, outcome, bool(truncated))
        for rid, m, s, c, a, st, strict, sp, outcome, truncated in records
    ]


def db_tallies(
    session: Session, run_ids: Iterable[str]
) -> tuple[list[Tally], list[ConstraintTally]]:
    """Per-scenario and per-constraint counts, aggregated in the database."""
    ids = list(run_ids)
    scored = (col(Record.status) == RecordStatus.OK) & col(Record.strict).is_not(None)
    n_scored = func.sum(case((scored, 1), else_=0))
    n_strict = func.sum(case((scored & (col(Record.strict).is_(True)), 1), else_=0))
    memory_failure = (col(Record.status) == RecordStatus.ERROR) & (
        col(Record.error_kind) == ErrorKind.MEMORY
    )
    n_errors = func.sum(case((scored, 0), (memory_failure, 0), else_=1))
    n_memory_errors = func.sum(case((memory_failure, 1), else_=0))
    outcome = col(Record.outcome)
    answered = scored & (outcome.is_(None) | (outcome == "answered"))
    n_unparseable = func.sum(case((scored & (outcome == "unparseable"), 1), else_=0))
    n_no_code = func.sum(case((scored & (outcome == "no-code"), 1), else_=0))
    n_truncated = func.sum(case((scored & col(Record.truncated).is_(True), 1), else_=0))
    n_answered_strict = func.sum(case((answered & col(Record.strict).is_(True), 1), else_=0))
    stmt = (
        sa_select(
            col(Record.model),
            col(Record.arm),
            col(Record.scenario_id),
            col(Record.category),
            n_scored,
            n_strict,
            n_errors,
            n_unparseable,
            n_no_code,
            n_truncated,
            n_answered_strict,
            n_memory_errors,
        )
        .where(col(Record.run_id).in_(ids))
        .group_by(Record.model, Record.arm, Record.scenario_id, Record.category)
    )
    tallies = [
        Tally(m, a, s, c, *(int(v or 0) for v in counts))
        for m, a, s, c, *counts in session.execute(stmt)
    ]
    honored = func.sum(case((col(ConstraintResult.honored).is_(True), 1), else_=0))
    pairs_answered = func.sum(case((answered, 1), else_=0))
    honored_answered = func.sum(
        case((answered & col(ConstraintResult.honored).is_(True), 1), else_=0)
    )
    cstmt = (
        sa_select(
            col(Record.model),
            col(Record.arm),
            col(Record.scenario_id),
            col(Record.category),
            col(ConstraintResult.constraint_id),
            func.count(),
            honored,
            pairs_answered,
            honored_answered,
        )
        .join(ConstraintResult, col(ConstraintResult.record_id) == col(Record.id))
        .where(col(Record.run_id).in_(ids), scored)
        .group_by(
            Record.model,
            Record.arm,
            Record.scenario_id,
            Record.category,
            ConstraintResult.constraint_id,
        )
    )
    ctallies = [
        ConstraintTally(m, a, s, c, cid, int(n), int(k or 0), int(na or 0), int(ka or 0))
        for m, a, s, c, cid, n, k, na, ka in session.execute(cstmt)
    ]
    return tallies, ctallies


def _layer_arm(kind: str) -> Any:
    return or_(col(Record.arm) == kind, col(Record.arm).startswith(kind + "@"))


def _pages(
    session: Session, columns: Sequence[Any], where: Sequence[Any], batch: int
) -> Iterator[Sequence[Any]]:
    """Rows of ``columns`` (the first is ``Record.id``) matching ``where``, in chunks of
    ``batch`` ordered by id (keyset paging: traces can be large, so never all at once)."""
    last = 0
    while True:
        chunk = session.execute(
            sa_select(*columns)
            .where(*where, col(Record.id) > last)
            .order_by(col(Record.id))
            .limit(batch)
        ).all()
        if not chunk:
            return
        yield chunk
        last = int(chunk[-1][0])


def _honored(session: Session, record_ids: list[int]) -> dict[int, dict[str, bool]]:
    """Each record's verdict per constraint, in the order the results were written."""
    honored: dict[int, dict[str, bool]] = {rid: {} for rid in record_ids}
    for rid, cid, ok in session.execute(
        sa_select(
            col(ConstraintResult.record_id),
            col(ConstraintResult.constraint_id),
            col(ConstraintResult.honored),
        )
        .where(col(ConstraintResult.record_id).in_(record_ids))
        .order_by(col(ConstraintResult.id))
    ):
        honored[int(rid)][str(cid)] = bool(ok)
    return honored


def db_memory_rows(session: Session, run_ids: Iterable[str], batch: int = 500) -> list[RecordRow]:
    """The records :func:`cvb_engine.metrics.summarize` reads memory traces from: every record
    of a ``memory-tool`` variant (its tool-use figures), and of each other memory-layer arm
    one record with a trace (its layer's name), never the response texts."""
    ids = list(run_ids)
    if not ids:
        return []
    columns = (
        col(Record.id),
        col(Record.model),
        col(Record.scenario_id),
        col(Record.category),
        col(Record.arm),
        col(Record.status),
        col(Record.strict),
        col(Record.error_kind),
        col(Record.memory_json),
    )

    def row(values: Any) -> RecordRow:
        _, model, sid, cat, arm, status, strict, kind, memory = values
        return RecordRow(model, sid, cat, arm, status, strict, error_kind=kind, memory=memory)

    out: list[RecordRow] = []
    where = (col(Record.run_id).in_(ids), _layer_arm("memory-tool"))
    for chunk in _pages(session, columns, where, batch):
        out += [row(v) for v in chunk]
    arms = session.execute(
        sa_select(col(Record.arm))
        .where(
            col(Record.run_id).in_(ids), _layer_arm("memory"), col(Record.memory_json).is_not(None)
        )
        .distinct()
    ).all()
    for (arm,) in arms:
        first = session.execute(
            sa_select(*columns)
            .where(
                col(Record.run_id).in_(ids),
                col(Record.arm) == arm,
                col(Record.memory_json).is_not(None),
            )
            .order_by(case((col(Record.status) == RecordStatus.OK, 0), else_=1), col(Record.id))
            .limit(1)
        ).first()
        if first is not None:
            out.append(row(first))
    return out


def db_agent_rows(
    session: Session, run_ids: Iterable[str], batch: int = 200
) -> Iterator[RecordRow]:
    """Every record of an ``agent`` variant of ``run_ids`` with its verdicts per constraint
    and its trace (:attr:`RecordRow.agent`), for :func:`cvb_engine.metrics.summarize`'s
    read-versus-obeyed figures; never the response texts.

    A generator over batches: traces hold transcripts, and the reader boils each record
    down as it comes (:func:`cvb_engine.agent.metrics.episode`), so a store of many
    episodes is never held whole.
    """
    ids = list(run_ids)
    if not ids:
        return
    columns = (
        col(Record.id),
        col(Record.model),
        col(Record.scenario_id),
        col(Record.category),
        col(Record.arm),
        col(Record.status),
        col(Record.strict),
        col(Record.outcome),
        col(Record.error_kind),
        col(Record.agent_json),
        col(Record.memory_json),
    )
    where = (col(Record.run_id).in_(ids), _layer_arm("agent"))
    for chunk in _pages(session, columns, where, batch):
        honored = _honored(session, [int(v[0]) for v in chunk])
        for rid, model, sid, cat, arm, status, strict, outcome, kind, agent, memory in chunk:
            yield RecordRow(
                model,
                sid,
                cat,
                arm,
                status,
                strict,
                honored[int(rid)],
                outcome=outcome,
                error_kind=kind,
                memory=memory,
                agent=agent,
            )


def db_delivery_rows(
    session: Session, run_ids: Iterable[str], batch: int = 1000
) -> list[RecordRow]:
    """The scored records of incentivized variants that stored a delivery record
    (``stale=``, ``budget=``), each with its constraints' verdicts, for
    :func:`cvb_engine.metrics.delivery_stats`; never the response texts."""
    ids = list(run_ids)
    if not ids:
        return []
    columns = (
        col(Record.id),
        col(Record.model),
        col(Record.scenario_id),
        col(Record.category),
        col(Record.arm),
        col(Record.status),
        col(Record.strict),
        col(Record.memory_json),
    )
    where = (
        col(Record.run_id).in_(ids),
        col(Record.arm).startswith("incentivized@"),
        col(Record.memory_json).is_not(None),
        col(Record.status) == RecordStatus.OK,
    )
    out: list[RecordRow] = []
    for chunk in _pages(session, columns, where, batch):
        honored = _honored(session, [int(v[0]) for v in chunk])
        for rid, model, sid, cat, arm, status, strict, memory in chunk:
            out.append(
                RecordRow(model, sid, cat, arm, status, strict, honored[int(rid)], memory=memory)
            )
    return out


def db_trace_rows(session: Session, run_ids: Iterable[str]) -> Iterator[RecordRow]:
    """What :func:`cvb_engine.metrics.summarize` reads traces from: the memory-layer arms'
    records (:func:`db_memory_rows`), the incentivized variants' deliveries
    (:func:`db_delivery_rows`), then the agent variants' (:func:`db_agent_rows`, in batches)."""
    ids = list(run_ids)
    yield from db_memory_rows(session, ids)
    yield from db_delivery_rows(session, ids)
    yield from db_agent_rows(session, ids)


def db_summary(session: Session, run_ids: Iterable[str], *, seed: int = BOOTSTRAP_SEED) -> Summary:
    """Every metric of the runs ``run_ids``: tallies aggregated in the database, and the
    memory-layer arms', incentivized deliveries' and agent variants' traces
    (:func:`db_trace_rows`)."""
    ids = list(run_ids)
    tallies, ctallies = db_tallies(session, ids)
    return summarize(tallies, ctallies, seed=seed, traces=db_trace_rows(session, ids))


def scoring_versions(session: Session, run_ids: Iterable[str]) -> dict[int, int]:
    """Scoring version -> scored records it judged, over ``run_ids`` (NULL is version 1)."""
    stmt = (
        sa_select(col(Record.scoring_version), func.count())
        .where(
            col(Record.run_id).in_(list(run_ids)),
            col(Record.status) == RecordStatus.OK,
            col(Record.strict).is_not(None),
        )
        .group_by(col(Record.scoring_version))
    )
    out: dict[int, int] = {}
    for version, n in session.execute(stmt):
        key = int(version) if version is not None else 1
        out[key] = out.get(key, 0) + int(n)
    return out


def file_scoring_versions(data: dict[str, Any]) -> dict[int, int]:
    """The same for a results file (a ``cvb-results/1`` record is version 1)."""
    out: dict[int, int] = {}
    for r in data.get("records", []):
        if r.get("status") == RecordStatus.OK:
            key = int(r.get("scoring_version") or 1)
            out[key] = out.get(key, 0) + 1
    return out


def run_scenario_ids(session: Session, run_ids: Iterable[str]) -> list[str]:
    stmt = (
        sa_select(col(Record.scenario_id)).where(col(Record.run_id).in_(list(run_ids))).distinct()
    )
    return [str(s) for (s,) in session.execute(stmt)]
