"""Arms as plugins: canonical names, parsing, sweeps, and what each variant builds.

The seed arms' bytes are pinned in ``tests/test_arm_pins.py``; here the memory
variants of ``incentivized`` are held to their contract: deterministic, nested
loads, positions, channels carrying the same memory text, and prompts free of
imperative wording.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cvb_engine.arms import (
    ArmContext,
    ArmError,
    arm_kinds,
    build_messages,
    canonical_arm,
    expand_sweep,
    parse_arm,
    parse_arms,
)
from cvb_engine.arms.incentivized import distractors, place
from cvb_engine.lint import imperative_words
from cvb_engine.prompts import messages_sha256
from cvb_engine.scenario import ARMS, load_library

REPO = Path(__file__).resolve().parent.parent
LIBRARY = load_library(REPO / "scenarios")
SCENARIO = (
    LIBRARY["concurrency-1"].scenario
    if "concurrency-1" in LIBRARY
    else next(item.scenario for item in LIBRARY.values() if not item.scenario.stated_tests)
)


def small_pool(tmp_path: Path, n: int = 30) -> ArmContext:
    entries = "\n".join(
        f"  - id: ops-{i:03d}\n    kind: ops\n    text: The on-call rotation changed in week {i} "
        f"after the storage review number {i}."
        for i in range(n)
    )
    path = tmp_path / "pool.yaml"
    path.write_text(f"version: 1\nentries:\n{entries}\n")
    return ArmContext(path)


# --- the registry and names -----------------------------------------------------------


def test_every_kind_has_params_a_version_and_a_description() -> None:
    kinds = arm_kinds()
    assert set(ARMS) <= set(kinds)
    for kind in kinds.values():
        assert kind.version and kind.description
        kind.params()  # every parameter has a default: the bare name is a variant


@pytest.mark.parametrize(
    ("text", "name"),
    [
        pytest.param("cold", "cold", id="seed"),
        pytest.param("incentivized@load=0", "incentivized", id="defaults-dropped"),
        pytest.param(
            "incentivized@position=middle,load=50",
            "incentivized@load=50,position=middle",
            id="declared-order",
        ),
        pytest.param(
            " incentivized @ channel = system ", "incentivized@channel=system", id="spaces"
        ),
        pytest.param(
            "incentivized@channel=history,turns=3",
            "incentivized@channel=history,turns=3",
            id="turns",
        ),
    ],
)
def test_canonical_names(text: str, name: str) -> None:
    assert canonical_arm(text) == name
    assert canonical_arm(name) == name  # stable: the canonical name names itself


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("bogus", "unknown arm 'bogus'", id="kind"),
        pytest.param("cold@load=5", "load", id="param-of-another-kind"),
        pytest.param("incentivized@lod=5", "lod", id="unknown-param"),
        pytest.param("incentivized@load=-1", "load", id="out-of-range"),
        pytest.param("incentivized@position=top", "position", id="bad-choice"),
        pytest.param("incentivized@load=5,load=6", "given twice", id="twice"),
        pytest.param("incentivized@load", "key=value", id="no-value"),
    ],
)
def test_bad_names_are_refused_with_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(ArmError, match=message):
        parse_arm(text)


def test_arms_list_keeps_a_variants_parameters_together() -> None:
    tokens = [
        "cold",
        "incentivized@load=50",
        "position=end",
        "mandated",
        "incentivized@channel=file",
    ]
    assert parse_arms(tokens) == [
        "cold",
        "incentivized@load=50,position=end",
        "mandated",
        "incentivized@channel=file",
    ]
    assert parse_arms(["incentivized", "incentivized@load=0"]) == ["incentivized"]


def test_a_sweep_expands_to_every_combination_first_key_slowest() -> None:
    assert expand_sweep(["load=0,10", "channel=inline,system"]) == [
        "incentivized",
        "incentivized@channel=system",
        "incentivized@load=10",
        "incentivized@load=10,channel=system",
    ]
    assert expand_sweep([]) == []  # no sweep adds no arm
    with pytest.raises(ArmError, match="key=value1"):
        expand_sweep(["load"])
    with pytest.raises(ArmError):
        expand_sweep(["load=0,x"])


# --- what the variants build --------------------------------------------------------------


def notes(messages: list[dict[str, str]]) -> list[str]:
    text = "\n".join(m["content"] for m in messages)
    return [line for line in text.splitlines() if line.startswith("- Decision ")]


def test_loads_are_nested_and_distractors_fixed_per_scenario(tmp_path: Path) -> None:
    ctx = small_pool(tmp_path)
    ten = [e.id for e in distractors("s1", ctx.pool, 10)]
    assert [e.id for e in distractors("s1", ctx.pool, 20)][:10] == ten
    assert [e.id for e in distractors("s2", ctx.pool, 10)] != ten  # another scenario, another draw
    with pytest.raises(ArmError, match="only 30 entries"):
        distractors("s1", ctx.pool, 31)


@pytest.mark.parametrize(
    ("position", "at"),
    [
        pytest.param("start", [0, 1], id="start"),
        pytest.param("end", [10, 11], id="end"),
        pytest.param("middle", [5, 6], id="middle"),
        pytest.param("spread", [3, 8], id="spread"),  # chunks of 3, 4 and 3
    ],
)
def test_positions(position: str, at: list[int]) -> None:
    facts = [("c1", "one"), ("c2", "two")]
    others = [(f"d{i}", "x") for i in range(10)]
    placed = place(facts, others, position)
    assert len(placed) == 12
    assert [i for i, item in enumerate(placed) if item in facts] == at


@pytest.mark.parametrize("channel", ["inline", "system", "file", "history"])
def test_every_channel_carries_the_same_memory_and_ends_with_the_task(
    channel: str, tmp_path: Path
) -> None:
    ctx = small_pool(tmp_path)
    base = build_messages(SCENARIO, "incentivized@load=12,position=middle", ctx)
    msgs = build_messages(SCENARIO, f"incentivized@load=12,position=middle,channel={channel}", ctx)
    assert notes(msgs) == notes(base) and len(notes(msgs)) == 12 + len(SCENARIO.constraints)
    assert msgs[-1]["role"] == "user" and SCENARIO.task.strip() in msgs[-1]["content"]
    assert msgs[0]["role"] == "system"
    roles = [m["role"] for m in msgs]
    if channel == "history":
        assert roles == ["system", "user", "assistant"] + ["user", "assistant"] * 2 + ["user"]
        assert not notes([msgs[-1]])  # the memory is turns away from the task
    else:
        assert roles == ["system", "user"]
    if channel == "system":
        assert notes([msgs[0]]) and not notes([msgs[1]])
    if channel == "file":
        assert "AGENTS.md" in msgs[1]["content"]


def test_history_turns_parameter(tmp_path: Path) -> None:
    msgs = build_messages(SCENARIO, "incentivized@channel=history,turns=0", small_pool(tmp_path))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]


def test_load_zero_of_every_channel_holds_only_the_constraints(tmp_path: Path) -> None:
    for channel in ("inline", "system", "file", "history"):
        msgs = build_messages(SCENARIO, f"incentivized@channel={channel}", small_pool(tmp_path))
        assert len(notes(msgs)) == len(SCENARIO.constraints)


def test_variants_are_deterministic_across_processes(tmp_path: Path) -> None:
    ctx = small_pool(tmp_path)
    arm = "incentivized@load=25,position=spread,channel=history,turns=3"
    here = messages_sha256(build_messages(SCENARIO, arm, ctx))
    script = (
        "import sys; from pathlib import Path\n"
        "from cvb_engine.arms import ArmContext\n"
        "from cvb_engine.arms import build_messages\nfrom cvb_engine.prompts import messages_sha256\n"
        "from cvb_engine.scenario import load_library\n"
        f"sc = load_library({str(REPO / 'scenarios')!r})[{SCENARIO.id!r}].scenario\n"
        f"print(messages_sha256(build_messages(sc, {arm!r}, ArmContext(Path({str(ctx.pool_path)!r})))))\n"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == here


# --- the shipped pool -------------------------------------------------------------------


SHIPPED_POOL = REPO / "scenarios" / "memory" / "pool.yaml"


@pytest.mark.skipif(not SHIPPED_POOL.exists(), reason="no shipped memory pool yet")
@pytest.mark.parametrize("channel", ["inline", "system", "file", "history"])
def test_every_rendered_memory_prompt_is_free_of_imperative_wording(channel: str) -> None:
    ctx = ArmContext(SHIPPED_POOL)
    load = min(200, len(ctx.pool))
    for sid, item in sorted(LIBRARY.items()):
        msgs = build_messages(item.scenario, f"incentivized@load={load},channel={channel}", ctx)
        text = "\n".join(m["content"] for m in msgs if m["role"] != "system" or channel == "system")
        assert imperative_words(text) == [], (sid, imperative_words(text))


def test_pins_file_is_unchanged_json() -> None:
    # the pins are data, loaded by tests/test_arm_pins.py; a parse here keeps them honest
    data = json.loads((REPO / "tests" / "fixtures" / "seed-arm-messages.json").read_text())
    assert data["prompt_version"] == "2.0"


def test_one_set_of_arms_is_one_order() -> None:
    from cvb_engine.arms import arm_order

    given = [
        "incentivized@load=50",
        "mandated",
        "incentivized@load=10,channel=system",
        "incentivized@load=10",
        "cold",
        "incentivized",
    ]
    ordered = arm_order(given)
    assert ordered == [
        "cold",
        "mandated",
        "incentivized",
        "incentivized@load=10",
        "incentivized@load=10,channel=system",
        "incentivized@load=50",
    ]
    assert arm_order(reversed(given)) == ordered


def test_the_memory_arms_own_words_name_nothing_a_check_looks_for() -> None:
    """Headers, the AGENTS.md frame and the scripted exchanges pass the pool's own lint
    (no orders, no checked name or pattern), as every pool entry does."""
    from cvb_engine.arms import incentivized as inc
    from cvb_engine.lint import lint_pool
    from cvb_engine.memory_pool import Pool

    texts = [inc.MEMORY_HEADER, inc.FILE_MEMORY, inc.HISTORY_MEMORY, inc.HISTORY_ACK]
    texts += [t for pair in inc.EXCHANGES for t in pair]
    pool = Pool.model_validate(
        {
            "version": 1,
            "entries": [
                {"id": f"ops-{i:03d}", "kind": "ops", "text": t.replace("{", "").replace("}", "")}
                for i, t in enumerate(texts)
            ],
        }
    )
    findings = [f for f in lint_pool(pool, list(LIBRARY.values())) if f.code in ("E020", "E021")]
    assert findings == []
