"""Frozen prompt templates for the three arms (README: Prompt changelog).

Any change to a template below changes what every model sees, so it bumps
:data:`PROMPT_VERSION` and gets a line in the README's prompt changelog.
Messages are built from the scenario alone, deterministically: the same
scenario and arm give byte-identical messages, and no LLM is involved.

The incentivized narrative must stay non-directive: it states each constraint
as a past decision recorded in project memory. A test renders it for every
shipped scenario and asserts that none of the lint's imperative words occur.
"""

from __future__ import annotations

import hashlib
import json
from typing import TypedDict

from cvb_engine.scenario import Scenario

PROMPT_VERSION = "2.0"


class Message(TypedDict):
    role: str
    content: str


SYSTEM = (
    "You are an experienced Python developer working in an existing code base. "
    "Reply with the complete solution as Python code in a single fenced code block."
)

TASK = "{task}"

STATED_TESTS = "\n\nThe code is checked with these tests:\n\n```python\n{tests}\n```"

MANDATED = (
    "{task_block}\n\n"
    "Requirements. You must follow every one of these rules; a solution that breaks "
    "any of them will be rejected:\n{orders}"
)
MANDATED_ITEM = "{n}. {text}"

INCENTIVIZED = (
    "Project memory: notes the team keeps about this repository, gathered over "
    "earlier work on it.\n\n{notes}\n\n---\n\n{task_block}"
)
INCENTIVIZED_ITEM = "- Decision {n} ({cid}): {text}"


def task_block(scenario: Scenario) -> str:
    """The task, with its stated tests when it has them: what every arm ends with."""
    block = TASK.format(task=scenario.task.strip())
    if scenario.stated_tests and scenario.stated_tests.strip():
        block += STATED_TESTS.format(tests=scenario.stated_tests.strip())
    return block


def messages_sha256(messages: list[Message]) -> str:
    """A stable hash of the messages (stored with every record as provenance)."""
    blob = json.dumps(messages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
