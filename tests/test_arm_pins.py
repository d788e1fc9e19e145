"""The seed arms' messages, pinned byte for byte under PROMPT_VERSION 2.0.

``tests/fixtures/seed-arm-messages.json`` holds the sha256 of the messages of
every shipped scenario under cold, mandated and incentivized, recorded before
arms became plugins. A published 2.0 number stays comparable only while these
hold: a change here is a new prompt version, never an edit of the pins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvb_engine.arms import build_messages
from cvb_engine.prompts import PROMPT_VERSION, messages_sha256
from cvb_engine.scenario import load_library

REPO = Path(__file__).resolve().parent.parent
PINS = json.loads((REPO / "tests" / "fixtures" / "seed-arm-messages.json").read_text())
LIBRARY = load_library(REPO / "scenarios")


def test_pins_cover_every_shipped_scenario_and_the_prompt_version() -> None:
    assert PINS["prompt_version"] == PROMPT_VERSION == "2.0"
    assert set(PINS["messages_sha256"]) == set(LIBRARY)
    assert len(LIBRARY) >= 84


@pytest.mark.parametrize("sid", sorted(PINS["messages_sha256"]))
def test_seed_arm_messages_are_byte_identical(sid: str) -> None:
    scenario = LIBRARY[sid].scenario
    for arm, digest in PINS["messages_sha256"][sid].items():
        assert messages_sha256(build_messages(scenario, arm)) == digest, (sid, arm)
