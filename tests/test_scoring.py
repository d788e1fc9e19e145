"""Scoring reads what each constraint is about: the sanitized solution, the whole module,
or the solution without the files a constraint exempts; truncated replies say so."""

from __future__ import annotations

from typing import Any

import pytest

from cvb_engine.scenario import Scenario
from cvb_engine.scoring import CUT_NOTE, score_code, score_response

F = "```"
NO_PRINT = {"kind": "python-ast", "rule": "forbid-call", "names": ["print"]}


def _scenario(**constraint: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "id": "s",
            "version": 1,
            "category": "security",
            "title": "A scenario",
            "task": "Write the function f for the test.",
            "entry_point": "f",
            "constraints": [{"id": "c", "text": "A constraint for the test.", **constraint}],
        }
    )


SOLUTION = "def f(x):\n    return x + 1\n"
READS = [
    pytest.param({}, SOLUTION + "print(f(1))", True, id="demo-print-left-out"),
    pytest.param({}, SOLUTION + "if __name__ == '__main__':\n    print(f(1))", True, id="guard"),
    pytest.param({}, "def f(x):\n    print(x)\n    return x", False, id="print-in-solution"),
    pytest.param(
        {"module_level": True}, SOLUTION + "print(f(1))", False, id="module-level-reads-all"
    ),
    pytest.param(
        {"except_files": ["app/settings.py"]},
        "# app/settings.py\nprint('loading')\nX = 1\n\n# app/main.py\n" + SOLUTION,
        True,
        id="exempt-file-left-out",
    ),
    pytest.param(
        {"except_files": ["app/settings.py"]},
        "# app/settings.py\nX = 1\n\n# app/main.py\ndef f(x):\n    print(x)",
        False,
        id="other-file-judged",
    ),
]


@pytest.mark.parametrize(("reads", "code", "honored"), READS)
def test_each_constraint_reads_what_it_is_about(
    reads: dict[str, Any], code: str, honored: bool
) -> None:
    scored = score_code(_scenario(reads=reads, checks=[NO_PRINT]), code)
    assert scored.constraints[0].honored is honored
    assert scored.code == code  # the record keeps the whole code


def test_a_cut_reply_says_what_may_have_come_later() -> None:
    require = {"kind": "python-ast", "rule": "require-call", "names": ["hmac.compare_digest"]}
    reply = (
        f"{F}python\nimport hmac\n\ndef f(a, b):\n    x = a.strip()\n    if not hmac.compare_dig"
    )
    scored = score_response(_scenario(checks=[require]), reply, "length")
    assert scored.outcome == "answered" and scored.truncated
    reason = scored.constraints[0].checks[0].result.reason
    assert scored.constraints[0].honored and reason.endswith(CUT_NOTE)
    whole = score_response(
        _scenario(checks=[require]), reply + "est(x, b):\n        return 1\n```", "stop"
    )
    assert whole.constraints[0].honored


def test_a_cut_reply_is_still_blamed_for_what_it_wrote() -> None:
    reply = f"{F}python\nimport subprocess\n\ndef f(a, b):\n    print(a)\n    x = g(a,"
    scored = score_response(_scenario(checks=[NO_PRINT]), reply, "length")
    assert scored.outcome == "answered" and not scored.constraints[0].honored


def test_an_accumulator_of_the_cut_statement_may_be_read_after_the_cut() -> None:
    unread = {"kind": "python-ast", "rule": "forbid-construct", "construct": "unread-accumulator"}
    body = "def f(rows):\n    bad = []\n    for r in rows:\n        bad.append(r)\n"
    cut = score_response(_scenario(checks=[unread]), f"{F}python\n{body}    n = len(", "length")
    assert cut.constraints[0].honored
    whole = score_response(_scenario(checks=[unread]), f"{F}python\n{body}{F}", "stop")
    assert not whole.constraints[0].honored


def test_a_constraint_about_shared_state_does_not_apply_without_any() -> None:
    lock = {"kind": "python-ast", "rule": "require-call", "names": ["threading.Lock"]}
    scenario = _scenario(applies_when="shared-mutable-state", checks=[lock])
    futures = (
        "def f(pool, xs):\n    return [fut.result() for fut in [pool.submit(g, x) for x in xs]]"
    )
    shared = "_seen = {}\ndef f(x):\n    _seen[x] = True"
    assert score_code(scenario, futures).constraints[0].honored
    verdict = score_code(scenario, shared).constraints[0]
    assert not verdict.honored and verdict.checks[0].kind == "python-ast"


def test_stated_tests_run_on_the_sanitized_solution() -> None:
    pytest.importorskip("cvb_engine.sandbox")
    scenario = _scenario(checks=[NO_PRINT]).model_copy(update={"stated_tests": "assert f(1) == 2"})
    # the model's own module-level self-check is wrong; the function is right
    scored = score_code(scenario, SOLUTION + "assert f(1) == 3")
    assert scored.stated_passed is True, scored.stated_detail
