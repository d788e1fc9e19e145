"""How a figure is written as text, the same in every renderer (``–`` for no figure,
``−`` for a negative sign, three decimals)."""

from __future__ import annotations

from cvb_engine.metrics import BOOTSTRAP_RESAMPLES, Interval, Outcomes, Rate, Summary


def resamples_text(resamples: int = BOOTSTRAP_RESAMPLES) -> str:
    """How the reports' notes name the bootstrap (from the figure, never written by hand)."""
    return f"{resamples:,} resamples, fixed seed"


RESAMPLES_TEXT = resamples_text()


def fmt_share(outcomes: Outcomes | None, name: str) -> str:
    """An outcome's share of the scored records, or "–"."""
    share = outcomes.share(name) if outcomes is not None else None
    return "–" if share is None else f"{share:.3f}"


def fmt_rate(rate: Rate | None, *, counts: bool = False) -> str:
    """``0.667``, with ``(4/6)`` when ``counts``; "–" without records."""
    if rate is None or rate.value is None:
        return "–"
    text = f"{rate.value:.3f}"
    return f"{text} ({rate.k}/{rate.n})" if counts else text


def fmt_signed(value: float | None) -> str:
    """A difference with its sign (``+0.125``, ``−0.250``, ``0.000`` near zero)."""
    if value is None:
        return "–"
    if abs(value) < 5e-4:
        return "0.000"
    return f"{value:+.3f}".replace("-", "−")


def fmt_gap(gap: Interval | None) -> str:
    """A gap with its CI: ``+0.125 [−0.050, +0.300]``."""
    if gap is None or gap.value is None:
        return "–"
    if gap.low is None or gap.high is None:
        return fmt_signed(gap.value)
    return f"{fmt_signed(gap.value)} [{fmt_signed(gap.low)}, {fmt_signed(gap.high)}]"


def fmt_interval(value: Interval) -> str:
    """A figure with its CI: ``0.667 [0.333, 1.000]``."""
    if value.value is None:
        return "–"
    if value.low is None or value.high is None:
        return f"{value.value:.3f}"
    return f"{value.value:.3f} [{value.low:.3f}, {value.high:.3f}]"


def fmt_fraction(value: float | None) -> str:
    """A share with three decimals, or "–"."""
    return "–" if value is None else f"{value:.3f}"


def fmt_rate_ci(rate: Rate, ci: Interval) -> str:
    """``0.667 [0.333, 1.000] (4/6)``, or "–" without records."""
    if rate.value is None:
        return "–"
    return f"{fmt_interval(ci)} ({rate.k}/{rate.n})"


def fmt_counts(rate: Rate | None, *, memory: bool = False) -> str:
    """Scored records / API errors (/ memory failures)."""
    if rate is None:
        return "–"
    if memory:
        return f"{rate.n} / {rate.errors} / {rate.memory_errors}"
    return f"{rate.n} / {rate.errors}"


def rate_detail(rate: Rate | None) -> str:
    """The small print under a rate: ``4/6 · 1 err · 2 memory failures``."""
    if rate is None or rate.value is None:
        return ""
    errors = f" · {rate.errors} err" if rate.errors else ""
    if rate.memory_errors:
        errors += f" · {rate.memory_errors} memory failure{'s' * (rate.memory_errors != 1)}"
    return f"{rate.k}/{rate.n}{errors}"


def arm_title(summary: Summary, arm: str) -> str:
    """An arm as reports name it: a memory-layer arm with its layer, ``memory (bm25)``,
    ``memory@command=./l.py (my-layer 0.1)``; any other arm by its name."""
    layer = summary.layers.get(arm)
    return f"{arm} ({layer})" if layer else arm


def has_layer_arms(summary: Summary) -> bool:
    """Whether a memory-layer arm ran (its failures are then counted apart in every table)."""
    return bool(summary.layers) or any(r.memory_errors for r in summary.strict.values())


def error_counts(summary: Summary) -> tuple[int, int]:
    """(API failures, memory-layer failures) over every model and arm."""
    rates = summary.strict.values()
    return sum(r.errors for r in rates), sum(r.memory_errors for r in rates)
