"""The published reference figures shipped under ``data/reference/`` (``cvb-reference/1``):
their typed shape and the one parser. Reports and the studio show them beside a run's
figures, always labelled as published."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "data" / "reference"
REFERENCE_FILE = REFERENCE_DIR / "cvb-2.0-groq.json"
REFERENCE_FORMAT = "cvb-reference/1"


@dataclass(frozen=True)
class PublishedCVB:
    """Strict accuracy per model and arm as published, with where and how it was measured."""

    label: str
    source: str
    dates: str
    protocol: dict[str, Any]
    strict: dict[str, dict[str, float]]
    gap: dict[str, float]

    @property
    def models(self) -> list[str]:
        return list(self.strict)


@dataclass(frozen=True)
class PublishedIVR:
    """One model's headline IVR figures as published."""

    model: str
    stated_pass_rate: float
    ivr: float
    qualifying_problems: int | None = None
    share_at_0_or_1: float | None = None


@dataclass(frozen=True)
class Reference:
    """The published figures shipped under ``data/reference/``."""

    cvb: PublishedCVB
    ivr: list[PublishedIVR]
    ivr_label: str
    ivr_source: str
    ivr_protocol: dict[str, Any]
    note: str


class ReferenceFileError(ValueError):
    """A reference file that does not have the expected shape."""


def parse_reference(data: Mapping[str, Any]) -> Reference:
    """Validate and read a ``cvb-reference/1`` object."""
    if data.get("format") != REFERENCE_FORMAT:
        raise ReferenceFileError(
            f"format: expected {REFERENCE_FORMAT!r}, found {data.get('format')!r}"
        )
    try:
        cvb = data["cvb"]
        strict = {
            str(m): {str(a): float(v) for a, v in arms.items()}
            for m, arms in cvb["strict_accuracy"].items()
        }
        dates = cvb["dates"]
        published = PublishedCVB(
            label=str(cvb["label"]),
            source=str(cvb["source"]),
            dates=f"{dates['start']} – {dates['end']}",
            protocol=dict(cvb["protocol"]),
            strict=strict,
            gap={str(m): float(v) for m, v in cvb["gap"].items()},
        )
        paper = data["ivr"]
        ivr_rows_ = [
            PublishedIVR(
                model=str(m),
                stated_pass_rate=float(v["stated_pass_rate"]),
                ivr=float(v["ivr"]),
                qualifying_problems=v.get("qualifying_problems"),
                share_at_0_or_1=v.get("share_at_0_or_1"),
            )
            for m, v in paper["models"].items()
        ]
        return Reference(
            cvb=published,
            ivr=ivr_rows_,
            ivr_label=str(paper["label"]),
            ivr_source=str(paper["source"]),
            ivr_protocol=dict(paper["protocol"]),
            note=str(data.get("note", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReferenceFileError(
            f"reference file does not have the cvb-reference/1 shape: {exc!r}"
        ) from None


def load_reference(path: str | Path | None = None) -> Reference | None:
    """The published figures, or None when the file is not there (a non-editable install)."""
    p = Path(path) if path is not None else REFERENCE_FILE
    if not p.is_file():
        return None
    return parse_reference(json.loads(p.read_text(encoding="utf-8")))
