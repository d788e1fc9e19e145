"""What a report says besides its figures: how the checks were isolated, which scoring
rules judged the records, and what the constraints' checks cannot see."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cvb_engine.sandbox import DEFAULT_BACKEND, is_weaker
from cvb_engine.scenario import LoadedScenario
from cvb_engine.scoring import SCORING_VERSION


def sandbox_backends(params: object) -> list[str] | None:
    """The sandbox backends that judged a run (``params["sandbox"]``: a resume or a
    re-score may add one); None for a run made before cvb recorded them."""
    raw = params.get("sandbox") if isinstance(params, dict) else None
    if raw is None:
        return None
    return [str(n) for n in raw] if isinstance(raw, list) else [str(raw)]


def weaker_backends(params: object) -> list[str]:
    """The backends weaker than the default (bwrap) among those that judged a run."""
    return [n for n in sandbox_backends(params) or () if is_weaker(n)]


def sandbox_label(params: object) -> str:
    """How a run's executed checks were isolated, from its params, for a report's header;
    a run older than the record, or one that executed no code, says so."""
    names = sandbox_backends(params)
    if names is None:
        return "not recorded (a run made before cvb recorded it, or no code executed)"
    if not names:
        return "none (no check executed model code)"
    weaker = weaker_backends(params)
    text = ", ".join(names)
    if weaker:
        text += f" (weaker than {DEFAULT_BACKEND}: {', '.join(weaker)}, named by the user)"
    return text


@dataclass(frozen=True)
class ReportNotes:
    """What a report says besides the metrics: the scoring rules that judged its
    records and what the checks of its constraints cannot see."""

    # scoring version -> number of scored records it judged (1: before outcomes)
    scoring_versions: Mapping[int, int] = field(default_factory=dict)
    # (scenario id, constraint id, limitation) for every constraint that states one
    limitations: tuple[tuple[str, str, str], ...] = ()

    @property
    def older_rules(self) -> int:
        """Scored records judged by rules older than this cvb's."""
        return sum(n for v, n in self.scoring_versions.items() if v < SCORING_VERSION)

    def older_rules_text(self) -> str | None:
        """The warning that some records were judged by older rules, or None."""
        if not self.older_rules:
            return None
        versions = ", ".join(str(v) for v in sorted(self.scoring_versions) if v < SCORING_VERSION)
        return (
            f"{self.older_rules:,} scored record(s) were judged by older scoring rules "
            f"(version {versions}; this cvb uses {SCORING_VERSION}). Their verdicts may differ "
            "from today's: re-score the run with `cvb score RUN_ID` (no API call)."
        )


def limitations_of(
    library: Mapping[str, LoadedScenario], scenario_ids: Iterable[str] | None = None
) -> tuple[tuple[str, str, str], ...]:
    """Every stated limitation of the constraints of ``scenario_ids`` (default: all)."""
    wanted = set(scenario_ids) if scenario_ids is not None else set(library)
    return tuple(
        (sid, c.id, " ".join(c.limitations.split()))
        for sid, item in sorted(library.items())
        if sid in wanted
        for c in item.scenario.constraints
        if c.limitations
    )
