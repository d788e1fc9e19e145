"""Stores written directly (no endpoint, no scoring): runs whose every value the test
chooses, for the readers of a store (reports, ``cvb db copy``, the Results page)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlmodel import Session

from cvb_engine.store import CheckOutcome, ConstraintResult, Record, Run, get_engine

ARMS = ("cold", "mandated", "incentivized")


def add_run(
    url: str,
    run_id: str,
    *,
    models: Iterable[str] = ("m-a", "m-b"),
    scenarios: Iterable[str] = ("s-one", "s-two"),
    category: str = "library-choice",
    text: str = "x = 1",
    prompt_version: str = "2.0",
    reason: str = "matched",
    constraint: str = "c-one",
    evidence: int = 1,
    arms: Iterable[str] = ARMS,
    stated: bool | None = None,
    note: str | None = None,
) -> None:
    """One run of ``models`` × ``scenarios`` × the seed arms, one rep, scored: a record
    honors its constraint unless its arm is cold; every stored string is the caller's."""
    with Session(get_engine(url)) as session:
        session.add(
            Run(
                id=run_id,
                prompt_version=prompt_version,
                params_json=json.dumps({"sandbox": ["bwrap"], "note": text}),
                status="done",
                note=text if note is None else note,
            )
        )
        session.flush()
        for model in models:
            for sid in scenarios:
                for arm in arms:
                    honored = arm != "cold"
                    record = Record(
                        run_id=run_id, model=model, scenario_id=sid, scenario_version=1,
                        scenario_sha256="s" * 64, category=category, arm=arm, rep=0,
                        status="ok", response=f"```python\n{text}\n```", code=text,
                        messages_sha256="m" * 64, prompt_version=prompt_version,
                        finish_reason=text[:200], strict=honored, n_constraints=1,
                        n_honored=int(honored), outcome="answered", truncated=False,
                        scoring_version=2, latency_s=0.5, reasoning=text, stated_passed=stated,
                    )  # fmt: skip
                    session.add(record)
                    session.flush()
                    assert record.id is not None
                    session.add(
                        ConstraintResult(
                            record_id=record.id, constraint_id=constraint, honored=honored
                        )
                    )
                    spans = [{"line": 1, "col": 0, "length": 1}] * evidence
                    session.add(
                        CheckOutcome(
                            record_id=record.id, constraint_id=constraint, check_index=0,
                            check_id=constraint, kind="regex", passed=honored, reason=reason,
                            evidence_json=json.dumps(spans),
                        )
                    )  # fmt: skip
        session.commit()
