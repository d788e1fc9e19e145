"""Read versus obeyed (cvb_engine.agent.metrics) against hand-counted episodes, and its report
section (Markdown, HTML, results-file summary) from records built by hand."""

from __future__ import annotations

import json

import pytest

from cvb_engine.agent.metrics import ENDINGS, AgentStat, Episode, agent_stats, episode, episodes
from cvb_engine.agent.trace import AgentTrace, ToolCall, WrittenFile
from cvb_engine.metrics import RecordRow, ordered_arms, summarize_rows, tally
from cvb_engine.report import html_report, markdown
from cvb_engine.report.export import agent_dict
from cvb_engine.report.tables import READ_HEADER, agent_tables
from cvb_engine.results_format import AgentEntry

C1, C2 = "c1", "c2"
TARGET = "app/fetch.py"


def trace(
    read: dict[str, bool],
    *,
    steps: int = 1,
    tokens: tuple[int, int] | None = (40, 10),
    ended: str = "answer",
    refused: int = 0,
    wrote: bool = True,
    variant: str = "agent",
) -> str:
    calls = [
        ToolCall(round=1, name="read_file", parsed={"path": "AGENTS.md"}, path="AGENTS.md")
    ] + [
        ToolCall(round=1, name="read_file", refused=True, reason="outside the workspace")
        for _ in range(refused)
    ]
    return AgentTrace(
        transport="tools",
        variant=variant,
        targets=(TARGET,),
        calls=tuple(calls),
        files=(WrittenFile(path=TARGET, content="x = 1\n", size=6),) if wrote else (),
        steps=steps,
        prompt_tokens=tokens[0] if tokens else None,
        completion_tokens=tokens[1] if tokens else None,
        ended_by=ended,  # type: ignore[arg-type]
        read=read,
    ).to_json()


def row(
    sid: str,
    honored: tuple[bool, bool] | None,
    agent: str | None,
    *,
    arm: str = "agent",
    model: str = "m",
    outcome: str = "answered",
) -> RecordRow:
    if honored is None:  # an error record
        return RecordRow(model, sid, "cat", arm, "error", None, {}, agent=agent)
    constraints = {C1: honored[0], C2: honored[1]}
    return RecordRow(
        model, sid, "cat", arm, "ok", all(honored), constraints, outcome=outcome, agent=agent
    )


# Hand-counted fixture, model m, two scenarios with constraints c1, c2:
#   e1 s1: read c1+c2, honors both (strict), 3 steps, 100 tokens, answer
#   e2 s1: read nothing, c1 violated, 1 step, 50 tokens, answer, one refused call
#   e3 s2: read c1 only, c2 violated, 12 steps, no tokens reported, ran out of steps
#   e4 s2: no trace, honors both (strict): unavailable
#   e5 s2: an error record whose trace ended in error
#   e6 s1: read c1, wrote nothing (no-code, honors nothing), 2 steps, 10 tokens, answer
# mandated: s1 2/2, s2 1/2
FIXTURE = [
    row("s1", (True, True), trace({C1: True, C2: True}, steps=3, tokens=(80, 20))),
    row("s1", (False, True), trace({C1: False, C2: False}, refused=1, tokens=(45, 5))),
    row("s2", (True, False), trace({C1: True, C2: False}, steps=12, tokens=None, ended="steps")),
    row("s2", (True, True), None),
    row("s2", None, trace({}, steps=0, ended="error", tokens=None)),
    row(
        "s1",
        (False, False),
        trace({C1: True}, steps=2, tokens=(8, 2), wrote=False),
        outcome="no-code",
    ),
    row("s1", (True, True), None, arm="mandated"),
    row("s1", (True, True), None, arm="mandated"),
    row("s2", (True, True), None, arm="mandated"),
    row("s2", (False, True), None, arm="mandated"),
]


@pytest.fixture(scope="module")
def stat() -> AgentStat:
    tallies, _ = tally(FIXTURE)
    (only,) = agent_stats(episodes(FIXTURE), tallies=tallies)
    return only


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("n", 5),
        ("errors", 1),
        ("unavailable", 1),
        ("traced", 4),
        ("read", 3),
        ("read_all", 1),
        ("steps", 3 + 1 + 12 + 2),
        ("steps_per_episode", 18 / 4),
        ("tool_calls", 1 + 2 + 1 + 1),
        ("calls_per_episode", 5 / 4),
        ("tokens", 100 + 50 + 10),
        ("tokens_n", 3),
        ("tokens_per_episode", 160 / 3),
        ("refused", 1),
        ("refused_episodes", 1),
        ("no_file", 1),
        ("read_share", 3 / 4),
        ("read_all_share", 1 / 4),
    ],
)
def test_counts_by_hand(stat: AgentStat, name: str, expected: float) -> None:
    assert getattr(stat, name) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "k", "n"),
    [
        ("strict", 2, 5),  # e1, e4
        ("constraint", 6, 10),  # e1 2, e2 1, e3 1, e4 2, e6 0
        ("strict_read", 1, 3),  # e1 of e1, e3, e6
        ("strict_unread", 0, 1),  # e2
        ("constraint_read", 3, 4),  # e1 c1, e1 c2, e3 c1 honored; e6 c1 not
        ("constraint_unread", 1, 4),  # e2 c2 honored; e2 c1, e3 c2, e6 c2 not
    ],
)
def test_rates_by_hand_with_their_intervals(stat: AgentStat, name: str, k: int, n: int) -> None:
    rate = getattr(stat, name)
    ci = getattr(stat, f"{name}_ci")
    assert (rate.k, rate.n) == (k, n)
    assert ci.value == pytest.approx(k / n)
    assert ci.low is not None and ci.high is not None
    assert 0.0 <= ci.low <= k / n <= ci.high <= 1.0


def test_gap_to_mandated_is_paired_over_scenarios(stat: AgentStat) -> None:
    assert stat.gap.value == pytest.approx(3 / 4 - 2 / 5)
    assert stat.gap.n_units == 2
    assert stat.gap.low is not None and stat.gap.high is not None
    assert stat.gap.low <= stat.gap.value <= stat.gap.high


def test_endings_count_error_records_too(stat: AgentStat) -> None:
    assert dict(stat.ended) == {"answer": 3, "steps": 1, "error": 1}


def test_the_figures_are_deterministic() -> None:
    tallies, _ = tally(FIXTURE)
    assert agent_stats(episodes(FIXTURE), tallies=tallies) == agent_stats(
        episodes(FIXTURE), tallies=tallies
    )


@pytest.mark.parametrize(
    ("constraints", "read", "expected"),
    [
        pytest.param({C1: True}, {C1: True}, True, id="its-constraint"),
        pytest.param({C1: True}, {C1: False}, False, id="flag-false"),
        pytest.param({C1: True}, {"other": True}, False, id="another-scenario's-id"),
        pytest.param({C1: True, C2: False}, {C2: True}, True, id="one-of-two"),
        pytest.param({}, {}, False, id="nothing"),
    ],
)
def test_what_counts_as_read(
    constraints: dict[str, bool], read: dict[str, bool], expected: bool
) -> None:
    e = Episode("m", "agent", "s", "ok", True, constraints, traced=True, read=read)
    assert e.read_any is expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param(json.dumps({"transport": "tools"}), id="missing-fields"),
        pytest.param(json.dumps([1, 2]), id="a-list"),
        pytest.param(
            json.dumps({"transport": "tools", "variant": "agent", "steps": "many"}), id="bad-type"
        ),
        pytest.param("[" * 100_000, id="deep"),
    ],
)
def test_a_trace_that_does_not_read_is_unavailable_never_an_error(text: str) -> None:
    e = episode(row("s1", (True, False), text))
    assert not e.traced
    (s,) = agent_stats([e])
    assert (s.n, s.unavailable, s.read, s.steps, s.strict.n) == (1, 1, 0, 0, 1)
    assert s.strict_read.n == 0 and s.strict_read.value is None


def test_one_stat_per_model_and_variant_in_the_matrix_order() -> None:
    rows = [
        row("s1", (True, True), trace({C1: True}), arm=arm, model=model)
        for model in ("m-b", "m-a")
        for arm in ("agent@rules=nested", "agent@preload=true", "agent", "cold")
    ]
    stats = agent_stats(episodes(rows))
    matrix = ordered_arms(["agent@rules=nested", "agent@preload=true", "agent"])
    assert matrix[0] == "agent"
    assert [(s.model, s.arm) for s in stats] == [(m, a) for m in ("m-a", "m-b") for a in matrix]
    assert all(s.gap.value is None for s in stats)  # no mandated records: no gap


def test_the_summary_carries_the_stats_and_the_agent_arm_stands_beside_the_seed_arms() -> None:
    summary = summarize_rows(FIXTURE)
    assert summary.arms == ["mandated", "agent"]
    (s,) = summary.agent
    assert (s.strict.k, s.strict.n) == (2, 5)
    assert summary.strict[("m", "agent")].n == 5


# --------------------------------------------------------------------------- the reports

HOSTILE_MODEL = "<img src=http://evil.test/m.png> **m** [x](http://evil.test)"


def test_every_report_has_the_section_and_the_results_summary_validates() -> None:
    summary = summarize_rows(FIXTURE)
    tables = agent_tables(summary)
    assert [t.title for t in tables] == [
        "Read versus obeyed (agent arm)",
        "Agent episodes: steps, tokens, how they ended",
    ]
    read = dict(zip(READ_HEADER, tables[0].texts()[0], strict=True))
    assert read["read the rules"] == "0.750 (3/4)"
    assert read["strict: read"].endswith("(1/3)") and read["strict: read"].startswith("0.333 [")
    assert read["strict: not read"].startswith("0.000") and read["strict: not read"].endswith(
        "(0/1)"
    )
    assert read["trace unavailable"] == "1"
    episodes_row = dict(zip(tables[1].header, tables[1].texts()[0], strict=True))
    assert episodes_row["steps per episode"] == "4.5"
    assert episodes_row["ended: steps limit"] == "1"
    assert episodes_row["refused calls (episodes)"] == "1 (1)"
    md = markdown(summary)
    assert "## Agent arm: read versus obeyed" in md and "0.750 (3/4)" in md
    page = html_report(summary, reference=None)
    assert "Agent arm: read versus obeyed" in page
    (entry,) = agent_dict(summary.agent)
    checked = AgentEntry.model_validate(entry)
    assert checked.read == 3 and checked.ended["steps"] == 1
    assert checked.strict_when_read.k == 1 and checked.strict_when_read.n == 3


def test_names_from_outside_stay_text() -> None:
    rows = [
        row("s1", (True, True), trace({C1: True}), model=HOSTILE_MODEL),
        row("s1", (False, True), trace({}), model=HOSTILE_MODEL, arm="agent@command=./a.sh"),
    ]
    summary = summarize_rows(rows)
    page = html_report(summary, reference=None)
    assert "<img" not in page and "&lt;img src=http://evil.test/m.png&gt;" in page
    md = markdown(summary)
    agent_part = md.split("## Agent arm", 1)[1]
    assert "<img" not in agent_part and "](http" not in agent_part


def test_preloaded_rules_are_counted_apart_from_what_was_read() -> None:
    # preload=true: both constraints in the system message; the agent opened nothing
    text = AgentTrace.model_validate_json(trace({C1: False, C2: False})).model_copy(
        update={"preload": True, "preloaded": (C1, C2)}
    )
    (s,) = agent_stats(episodes([row("s1", (True, True), text.to_json())]))
    assert (s.read, s.preloaded, s.strict_unread.n, s.strict_read.n) == (0, 1, 1, 0)
    assert s.preloaded_share == 1.0


def test_an_agent_program_whose_reads_went_unseen_is_in_no_read_figure() -> None:
    from cvb_engine.agent.trace import CommandRun

    base = AgentTrace.model_validate_json(trace({C1: False, C2: False}))
    unseen = base.model_copy(
        update={"transport": "command", "command": CommandRun(command="./a.sh")}
    )
    seen = base.model_copy(
        update={
            "transport": "command",
            "command": CommandRun(command="./a.sh", reads_observed=True),
            "read": {C1: True, C2: False},
        }
    )
    rows = [
        row("s1", (False, True), unseen.to_json(), arm="agent@command=./a.sh"),
        row("s2", (True, True), seen.to_json(), arm="agent@command=./a.sh"),
    ]
    (s,) = agent_stats(episodes(rows))
    assert (s.n, s.reads_unobserved, s.observed, s.read) == (2, 1, 1, 1)
    assert (s.strict_read.k, s.strict_read.n, s.strict_unread.n) == (1, 1, 0)
    assert s.read_share == 1.0 and (s.strict.k, s.strict.n) == (1, 2)
    (table, _) = agent_tables(summarize_rows(rows))
    assert dict(zip(READ_HEADER, table.texts()[0], strict=True))["reads not observed"] == "1"


def _naive(items: list[Episode]) -> dict[str, tuple[int, int]]:
    """The same counts, recomputed the plainest way (no per-scenario bookkeeping)."""
    scored = [e for e in items if e.status == "ok" and e.strict is not None]
    traced = [e for e in scored if e.traced]
    seen = [e for e in traced if e.reads_observed]

    def read(e: Episode) -> bool:
        return any(e.read.get(c, False) for c in e.constraints)

    pairs_read = [(e, c) for e in seen for c in e.constraints if e.read.get(c, False)]
    pairs_unread = [(e, c) for e in seen for c in e.constraints if not e.read.get(c, False)]
    return {
        "strict": (sum(bool(e.strict) for e in scored), len(scored)),
        "constraint": (
            sum(h for e in scored for h in e.constraints.values()),
            sum(len(e.constraints) for e in scored),
        ),
        "strict_read": (
            sum(bool(e.strict) for e in seen if read(e)),
            sum(read(e) for e in seen),
        ),
        "strict_unread": (
            sum(bool(e.strict) for e in seen if not read(e)),
            sum(not read(e) for e in seen),
        ),
        "constraint_read": (sum(e.constraints[c] for e, c in pairs_read), len(pairs_read)),
        "constraint_unread": (sum(e.constraints[c] for e, c in pairs_unread), len(pairs_unread)),
        "steps": (sum(e.steps for e in traced), len(traced)),
        "refused": (sum(e.refused for e in traced), sum(e.refused > 0 for e in traced)),
        "preloaded": (sum(e.in_system for e in traced), len(traced)),
        "errors": (len(items) - len(scored), len(scored) - len(traced)),
    }


@pytest.mark.parametrize("seed", range(6))
def test_random_episodes_agree_with_a_plain_recount(seed: int) -> None:
    """Random episodes of every kind (error records, traces missing, reads unobserved,
    preloaded, partial reads, several scenarios and variants): the figures equal a plain
    recount, and every interval holds its point."""
    import random

    rng = random.Random(seed)
    items = []
    for _ in range(rng.randint(1, 120)):
        ids = [f"c{i}" for i in range(rng.randint(1, 4))]
        honored = {c: rng.random() < 0.6 for c in ids}
        status = "error" if rng.random() < 0.1 else "ok"
        items.append(
            Episode(
                model="m",
                arm=rng.choice(["agent", "agent@preload=true"]),
                scenario_id=f"s{rng.randint(1, 7)}",
                status=status,
                strict=None if status == "error" else all(honored.values()),
                constraints={} if status == "error" else honored,
                traced=rng.random() < 0.9,
                read={c: rng.random() < 0.5 for c in [*ids, "stray"]},
                preloaded=tuple(c for c in ids if rng.random() < 0.3),
                reads_observed=rng.random() < 0.85,
                steps=rng.randint(0, 12),
                refused=rng.choice([0, 0, 1, 3]),
                ended_by=rng.choice(ENDINGS),
            )
        )
    for s in agent_stats(items):
        mine = [e for e in items if e.arm == s.arm]
        expected = _naive(mine)
        for name in (
            "strict",
            "constraint",
            "strict_read",
            "strict_unread",
            "constraint_read",
            "constraint_unread",
        ):
            rate, ci = getattr(s, name), getattr(s, f"{name}_ci")
            assert (rate.k, rate.n) == expected[name], name
            if rate.n:
                assert ci.low is not None and ci.high is not None
                assert ci.low - 1e-12 <= rate.value <= ci.high + 1e-12
        assert (s.steps, s.traced) == expected["steps"]
        assert (s.refused, s.refused_episodes) == expected["refused"]
        assert s.preloaded == expected["preloaded"][0]
        assert (s.errors, s.unavailable) == expected["errors"]
        assert s.read == expected["strict_read"][1]
        assert s.observed == expected["strict_read"][1] + expected["strict_unread"][1]
        traced_endings = sum(1 for e in mine if e.traced and e.ended_by)
        assert sum(s.ended.values()) == traced_endings
