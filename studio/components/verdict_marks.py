"""Turn scored verdicts into code-view marks: one mark per evidence span, labelled by its check.

Shared by every page that shows checked code (the Author playground, the
Results drill-down), so a span is labelled ``constraint-id/check-id`` the same
way everywhere.
"""

from __future__ import annotations

from cvb_engine import Scored
from studio.components.code_view import Mark


def check_label(constraint_id: str, check_id: str) -> str:
    return f"{constraint_id}/{check_id}"


def marks_for(scored: Scored, scope: str = "code") -> list[Mark]:
    """Marks for the spans whose check looked at ``scope`` ("code" or "response").

    A failed check's spans are violations (red); a passed check's spans, such as
    the match of a ``require`` pattern, are shown as satisfied (green).
    """
    marks: list[Mark] = []
    for constraint in scored.constraints:
        for check in constraint.checks:
            result = check.result
            if result.scope != scope:
                continue
            label = check_label(constraint.constraint_id, check.check_id)
            marks.extend(
                Mark(span.line, span.col, span.length, label, result.reason, not result.passed)
                for span in result.evidence
            )
    return marks
