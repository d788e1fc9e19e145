"""A stub model for the memory-realism tests: it follows the decision it sees last (or first).

Served through :class:`fake_openai.FakeOpenAI` as its ``reply`` function. For each
request it finds the scenario by its task, then, per constraint, looks in the
messages for the constraint's current note and for its superseded note (each whole,
spacing set aside). It follows whichever of the two it sees last (``order="last"``)
or first (``order="first"``); with neither in sight it keeps the old practice, as a
model without the memory would. Its answer is code that honors exactly the
constraints whose current decision it followed: the scenarios it serves (written by
:func:`write_library`) check each constraint with one regex on a call only that
decision makes (``new_<x>(`` versus ``old_<x>(``).

``given`` records, by the sha256 of the messages (what each record stores), what the
stub saw per constraint: ``"current"``, ``"superseded"``, ``"both"`` or ``"none"``,
and ``followed`` what it followed; the tests compare the stored delivered flags and
the reports' split with them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cvb_engine.scenario import Scenario

#: Constraint text lengths differ so that a budget cuts the memories at different notes.
_TOPICS = [
    ("fetch", "HTTP fetching", "after the 2024 pool-exhaustion incident"),
    ("store", "storage writes", "since the 2023 corruption postmortem, with batched commits"),
    ("clock", "time readings", "after the 2025 drift investigation"),
    ("parse", "configuration parsing", "since a 2024 review found silent key collisions"),
    ("audit", "audit events", "after the 2023 compliance finding about missing entries"),
    ("queue", "background jobs", "since the 2024 backlog incident that lost retries"),
]


def scenario_yaml(k: int, n_constraints: int = 3) -> str:
    """One scenario of the stub's library: ``n_constraints`` decisions, each checked by a
    regex that requires the call the current decision makes."""
    lines = [
        f"id: stub-{k}",
        "version: 1",
        "category: library-choice",
        f"title: Stub scenario {k}",
        "task: |",
        f"  Write a function handle_{k}(item) that processes one item for service {k}.",
        "constraints:",
    ]
    for j in range(n_constraints):
        name, topic, why = _TOPICS[(k + j) % len(_TOPICS)]
        tag = f"{name}{k}"
        filler = " and the shared helpers" * ((k + j) % 4)
        lines += [
            f"  - id: {name}-{k}-new",
            "    text: >-",
            f"      In service {k}, {topic} go through new_{tag}() {why}{filler}.",
            "    superseded: >-",
            f"      2022-0{1 + j}: In service {k}, {topic} go through old_{tag}(), the helper the "
            f"first release shipped{filler}.",
            "    checks:",
            "      - kind: regex",
            f"        require: 'new_{tag}\\('",
            "    samples:",
            f"      violating: ['old_{tag}(item)', 'x = 1', 'old_{tag}()']",
            f"      compliant: ['new_{tag}(item)', 'new_{tag}(1)', 'y = new_{tag}(item)']",
        ]
    return "\n".join(lines) + "\n"


def write_library(root: Path, n: int = 4) -> Path:
    """``n`` stub scenarios under ``root/library-choice``; returns ``root``."""
    folder = root / "library-choice"
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(1, n + 1):
        (folder / f"stub-{k}.yaml").write_text(scenario_yaml(k, 2 + k % 2), encoding="utf-8")
    return root


def _norm(text: str) -> str:
    return " ".join(text.split())


def _sha(messages: list[dict[str, Any]]) -> str:
    # the same digest as cvb_engine.prompts.messages_sha256
    blob = json.dumps(messages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class DecisionStub:
    """The reply function; ``scenarios`` are the library it serves."""

    scenarios: list[Scenario]
    order: Literal["last", "first"] = "last"
    given: dict[str, dict[str, str]] = field(default_factory=dict)
    followed: dict[str, dict[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = [
            {"role": m["role"], "content": m["content"]} for m in request.get("messages", [])
        ]
        seen = _norm("\n".join(m["content"] for m in messages))
        scenario = next(s for s in self.scenarios if _norm(s.task) in seen)
        given: dict[str, str] = {}
        followed: dict[str, str] = {}
        calls = []
        for c in scenario.constraints:
            current = (
                seen.rfind(_norm(c.text)) if self.order == "last" else seen.find(_norm(c.text))
            )
            old_text = _norm(c.superseded or "")
            old = (
                (seen.rfind(old_text) if self.order == "last" else seen.find(old_text))
                if old_text
                else -1
            )
            given[c.id] = {
                (True, True): "both",
                (True, False): "current",
                (False, True): "superseded",
                (False, False): "none",
            }[(current >= 0, old >= 0)]
            if current >= 0 and (old < 0 or (current > old) == (self.order == "last")):
                followed[c.id] = "current"
            else:
                followed[c.id] = "superseded" if old >= 0 else "none"
            tag = re.search(r"new_(\w+)\\\(", c.checks[0].raw_params().get("require", ""))
            name = tag.group(1) if tag else c.id
            calls.append(
                f"new_{name}(item)" if followed[c.id] == "current" else f"old_{name}(item)"
            )
        digest = _sha(messages)
        with self._lock:
            self.given[digest] = given
            self.followed[digest] = followed
        body = "\n".join(f"    {call}" for call in calls)
        fn = re.search(r"handle_\d+", scenario.task)
        name = fn.group(0) if fn else "handle"
        return f"```python\ndef {name}(item):\n{body}\n    return item\n```"
