"""Re-scoring a stored run: its answers judged again by the current checks, no API call.

``cvb score`` is this module's command; anything else (a test, the studio) calls
:func:`rescore_run` the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from cvb_engine import sandbox
from cvb_engine.kinds import RecordStatus
from cvb_engine.scenario import LoadedScenario

__all__ = ["RescoreError", "Rescored", "rescore_run"]


class RescoreError(Exception):
    """The run cannot be re-scored (it is not in the store); the message says which."""


@dataclass(frozen=True, slots=True)
class Rescored:
    """What re-scoring a run did, record by record."""

    run_id: str
    scoring_version: int
    #: records judged again (every ``ok`` record whose scenario is in the library)
    scored: int
    #: of those, the ones whose verdict (strict, honoured count) or outcome changed
    verdicts_changed: int
    #: of those, the ones last judged under another scoring version
    older_rules: int
    #: of those, the ones whose scenario file changed since they were generated
    scenario_changed: int
    #: ``ok`` records skipped: their scenario is not in the library
    scenario_missing: int


def rescore_run(
    run_id: str,
    library: Mapping[str, LoadedScenario],
    *,
    db: str | None = None,
    sandbox_choice: str | None = None,
    commit_every: int = 500,
) -> Rescored:
    """Judge every ``ok`` record of run ``run_id`` again with ``library``'s checks, and
    store the new scores (the provenance of each record is kept).

    Args:
        run_id: the stored run.
        library: the scenarios to judge with, by id (:func:`cvb_engine.scenario.load_library`).
        db: the store's URL (default: :func:`cvb_engine.store.database_url`).
        sandbox_choice: the backend the user named for model code (``--sandbox``); None
            for bwrap or ``$CVB_SANDBOX``. Added to the run's params as one that judged it.
        commit_every: records per commit.

    Raises:
        RescoreError: no run ``run_id`` in the store.
        sandbox.SandboxError: a scenario executes model code and no sandbox works here
            (raised before anything executes).
    """
    from sqlalchemy.engine import make_url

    from cvb_engine.results import iter_run_records, save_scores
    from cvb_engine.scoring import SCORING_VERSION, executes_code, score_record
    from cvb_engine.store import Record, Run, database_url, session_scope

    scored = verdicts_changed = older = changed = missing = 0
    with session_scope(db) as session:
        run = session.get(Run, run_id)
        if run is None:
            label = make_url(database_url(db)).render_as_string(hide_password=True)
            raise RescoreError(f"no run {run_id!r} in {label}")
        if any(executes_code(item.scenario) for item in library.values()):
            # before the first execution; the run's params name every backend that judged it
            backend = sandbox.choose(sandbox_choice)
            run.params_json = json.dumps(sandbox.with_backend(run.params, backend))
            session.add(run)
        ids = [r.id for r in iter_run_records(session, run_id) if r.status == RecordStatus.OK]
        for rid in ids:
            record = session.get(Record, rid)
            assert record is not None
            item = library.get(record.scenario_id)
            if item is None:
                missing += 1
                continue
            if item.sha256 != record.scenario_sha256:
                changed += 1
            before = (record.strict, record.n_honored, record.outcome)
            now = score_record(
                item.scenario, record.response or "", record.finish_reason, record.agent_json
            )
            if record.scoring_version != SCORING_VERSION:
                older += 1
            save_scores(session, record, now)
            if (now.strict, now.n_honored, now.outcome) != before:
                verdicts_changed += 1
            scored += 1
            if scored % commit_every == 0:
                session.commit()
        session.commit()
    return Rescored(
        run_id=run_id,
        scoring_version=SCORING_VERSION,
        scored=scored,
        verdicts_changed=verdicts_changed,
        older_rules=older,
        scenario_changed=changed,
        scenario_missing=missing,
    )
