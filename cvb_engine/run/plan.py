"""What a run sends: its cells, its matrix and the scenarios it covers.

Kept free of the store, the HTTP client and the runner's options, so that the
claims, the recorder and the lifecycle can name a :data:`Cell` or plan a matrix
without importing the rest of the runner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cvb_engine.arms import DEFAULT_POOL
from cvb_engine.cells import Cell
from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.run.errors import RunError
from cvb_engine.scenario import CVB_CATEGORIES, LoadedScenario


@dataclass(frozen=True)
class Matrix:
    """What a run id is bound to."""

    models: list[str]
    scenarios: dict[str, dict[str, Any]]  # id → {version, sha256, category}
    arms: list[str]
    runs: int
    temperature: float
    max_tokens: int
    seed: int | None
    prompt_version: str = PROMPT_VERSION
    # sha256 of the memory pool, when a variant draws distractors from it
    memory_pool: str | None = None
    # sha256 of the scenarios' superseded notes, when a variant shows them (stale=): the
    # scenario hashes leave the notes out (cvb_engine.scenario.content_sha256)
    superseded: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {
            "models": self.models,
            "scenarios": self.scenarios,
            "arms": self.arms,
            "runs": self.runs,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prompt_version": self.prompt_version,
        }
        if self.memory_pool is not None:  # absent otherwise: older runs keep their hash
            out["memory_pool"] = self.memory_pool
        if self.superseded is not None:  # likewise
            out["superseded"] = self.superseded
        return out

    @property
    def sha256(self) -> str:
        blob = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def cells(self) -> list[Cell]:
        # Repetition-major, then scenario, arm, model: a live view sees every
        # arm and model fill up together instead of one after another.
        return [
            (model, sid, arm, rep)
            for rep in range(self.runs)
            for sid in sorted(self.scenarios)
            for arm in self.arms
            for model in self.models
        ]

    @property
    def size(self) -> int:
        return len(self.models) * len(self.scenarios) * len(self.arms) * self.runs


def diff_matrices(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "scenarios":
            o, n = old.get(key) or {}, new.get(key) or {}
            added = sorted(set(n) - set(o))
            removed = sorted(set(o) - set(n))
            changed = sorted(s for s in set(o) & set(n) if o[s] != n[s])
            parts = [f"added {added}" if added else "", f"removed {removed}" if removed else ""]
            parts.append(f"changed files {changed}" if changed else "")
            out.append("scenarios: " + "; ".join(p for p in parts if p))
        else:
            out.append(f"{key}: {old.get(key)!r} → {new.get(key)!r}")
    return out


def select_scenarios(
    library: dict[str, LoadedScenario],
    categories: Sequence[str] | None,
    only: Sequence[str] | None,
) -> dict[str, LoadedScenario]:
    """The scenarios a run covers: by id, by category, or by default the CVB set
    (the IVR pack runs when asked for, or when it is all there is)."""
    if only:
        missing = [s for s in only if s not in library]
        if missing:
            raise RunError(f"unknown scenario id(s): {', '.join(missing)}")
        return {s: library[s] for s in only}
    if categories:
        picked = {k: v for k, v in library.items() if v.scenario.category in categories}
    elif any(v.scenario.category in CVB_CATEGORIES for v in library.values()):
        picked = {k: v for k, v in library.items() if v.scenario.category in CVB_CATEGORIES}
    else:
        picked = dict(library)
    if not picked:
        raise RunError("no scenarios selected")
    return picked


def pool_path(scenarios: str) -> Path:
    """The memory pool of a scenario library: its ``memory/pool.yaml``, else the shipped one."""
    root = Path(scenarios)
    own = (root if root.is_dir() else root.parent) / "memory" / "pool.yaml"
    return own if own.is_file() else DEFAULT_POOL


__all__ = ["Cell", "Matrix", "diff_matrices", "pool_path", "select_scenarios"]
