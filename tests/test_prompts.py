"""Prompts: three arms, deterministic, incentivized free of imperative wording."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvb_engine.arms import build_messages
from cvb_engine.lint import imperative_words
from cvb_engine.prompts import PROMPT_VERSION, messages_sha256
from cvb_engine.scenario import ARMS, load_library, load_text

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def shipped() -> list:
    return sorted(load_library(SCENARIOS).values(), key=lambda i: i.scenario.id)


def test_prompt_version() -> None:
    assert PROMPT_VERSION == "2.0"


@pytest.mark.parametrize("arm", ARMS)
def test_messages_are_deterministic(valid_text: str, arm: str) -> None:
    a = build_messages(load_text(valid_text).scenario, arm)
    b = build_messages(load_text(valid_text).scenario, arm)
    assert a == b and messages_sha256(a) == messages_sha256(b)


def test_unknown_arm_is_refused(valid_text: str) -> None:
    with pytest.raises(ValueError, match="unknown arm"):
        build_messages(load_text(valid_text).scenario, "sneaky")


def test_arms_differ_in_how_constraints_arrive(valid_text: str) -> None:
    sc = load_text(valid_text).scenario
    cold, mandated, incentivized = (build_messages(sc, arm)[-1]["content"] for arm in ARMS)
    for c in sc.constraints:
        assert c.text not in cold
        assert c.text in mandated and c.text in incentivized
    assert sc.task.strip() in cold and sc.task.strip() in incentivized
    assert imperative_words(mandated)  # framed as orders
    assert len({messages_sha256(build_messages(sc, a)) for a in ARMS}) == 3


def test_stated_tests_are_shown_in_every_arm(valid_text: str) -> None:
    text = valid_text.replace(
        "constraints:", "stated_tests: |\n  assert fetch_json is not None\nconstraints:", 1
    )
    sc = load_text(text).scenario
    for arm in ARMS:
        assert "assert fetch_json is not None" in build_messages(sc, arm)[-1]["content"]


def test_shipped_scenarios_render_in_all_arms() -> None:
    items = shipped()
    assert items, "no shipped scenarios found"
    for item in items:
        sc = item.scenario
        cold = "\n".join(m["content"] for m in build_messages(sc, "cold"))
        mandated = "\n".join(m["content"] for m in build_messages(sc, "mandated"))
        incentivized = "\n".join(m["content"] for m in build_messages(sc, "incentivized"))
        assert imperative_words(incentivized) == [], sc.id
        assert imperative_words(mandated), sc.id
        for c in sc.constraints:
            assert c.text.strip() in incentivized, (sc.id, c.id)
            assert c.text.strip() in mandated, (sc.id, c.id)
            assert c.text.strip() not in cold, (sc.id, c.id)
