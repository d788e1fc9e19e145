"""The studio for the agent arm (README: Agent arm), driven through Streamlit's AppTest.

Results: a store holding ``mandated``, ``agent`` and ``agent@preload=true`` with
hand-made episode traces (``tests/agent_store.py``, figures counted by hand there):
the agent variants stand beside the seed arm in the overview, the Agent view
shows read versus obeyed, Side by side shows an episode as its transcript (the
rules lines it saw highlighted, refusals with their reason, the final file with
its violations marked) and keeps every string from the trace inert. Run: the
agent builder makes variants that join the run's arms, and the dry run counts
episodes as cells.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from markdown_support import assert_inert, shown
from streamlit.testing.v1 import AppTest
from test_run_page import bodies, click, open_page, run, studio  # noqa: F401  (a fixture)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import agent_store as ags  # noqa: E402
from conftest import VALID_SCENARIO  # noqa: E402

from cvb_engine.store import dispose_engines  # noqa: E402

APP = TESTS.parent / "studio" / "streamlit_app.py"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("agent-pages")
    scenarios = ags.write_scenarios(tmp / "scenarios", VALID_SCENARIO)
    url = f"sqlite:///{tmp / 'cvb.db'}"
    ags.fill(url, VALID_SCENARIO)
    dispose_engines()
    return url, scenarios


@pytest.fixture
def store(filled: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CVB_DATABASE_URL", filled[0])
    monkeypatch.setenv("CVB_SCENARIOS", str(filled[1]))
    yield
    dispose_engines()


def results(view: str, **state: object) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("app_pages/results.py")
    at.session_state["results_runs"] = [ags.RUN_ID]
    at.session_state["results_view"] = view
    for key, value in state.items():
        at.session_state[key] = value
    return run(at)


def everything(at: AppTest) -> list[str]:
    return [*bodies(at), *(str(e.label) for e in at.expander)]


# --------------------------------------------------------------------------- Results


def test_the_overview_lists_the_agent_variants_beside_the_seed_arm(store: None) -> None:
    at = results("Overview")
    # the strict-accuracy table: one column per arm, the agent variants after the seed arm
    acc = next(d.value for d in at.dataframe if "mandated n" in d.value.columns)
    arms = [c for c in acc.columns if c in ("mandated", ags.AGENT, ags.PRELOAD)]
    assert arms == ["mandated", ags.AGENT, ags.PRELOAD]
    row = acc.iloc[0]
    assert abs(row[ags.AGENT] - 0.5) < 1e-9 and abs(row[ags.PRELOAD]) < 1e-9
    assert row["mandated"] == 1.0


def test_the_agent_view_shows_read_versus_obeyed(store: None) -> None:
    at = results("Agent")
    tables = {tuple(d.value.columns)[:4]: d.value for d in at.dataframe}
    read = next(v for k, v in tables.items() if "strict [95% CI]" in k)
    by_arm = {r["arm"]: r for _, r in read.iterrows()}
    assert by_arm[ags.AGENT]["read the rules"] == "0.500 (1/2)"
    assert by_arm[ags.AGENT]["strict: read"] == "1.000 [1.000, 1.000] (1/1)"
    assert by_arm[ags.AGENT]["strict: not read"] == "0.000 [0.000, 0.000] (0/1)"
    assert by_arm[ags.PRELOAD]["read the rules"] == "0.500 (1/2)"
    assert by_arm[ags.PRELOAD]["rules in the system message"] == "1.000 (2/2)"
    assert by_arm[ags.AGENT]["rules in the system message"] == "–"
    assert by_arm[ags.PRELOAD]["gap to mandated [95% CI]"].startswith("+1.000")
    episodes = next(v for k, v in tables.items() if "steps per episode" in k)
    pre = episodes[episodes["arm"] == ags.PRELOAD].iloc[0]
    assert pre["ended: steps limit"] == "1" and pre["refused calls (episodes)"] == "2 (1)"
    assert pre["no file"] == "1"


def test_side_by_side_shows_an_episode_as_its_transcript(store: None) -> None:
    at = results("Side by side", results_sbs_model=ags.MODEL, results_sbs_scenario=ags.SID)
    page = "\n".join(shown(b) for b in everything(at))
    assert "**Agent episode** · agent · 2 tool rounds · 2 calls · 300 tokens · 1.5 s" in page
    labels = [shown(str(e.label)) for e in at.expander if str(e.label).startswith("Round")]
    assert labels[:2] == [
        f"Round 1 · read_file(AGENTS.md) · {len(ags.RULES_TEXT)} characters · shows "
        "httpx-not-requests, timeout-set",
        "Round 2 · write_file(app/fetch.py) · 30 characters",
    ]
    html = "\n".join(h.value for h in at.html)
    # the rules file it read, with the constraint lines highlighted and named
    assert 'data-check="rule: httpx-not-requests"' in html
    assert 'data-check="rule: timeout-set"' in html
    # the final file with the violation marked by its check (mandated is clean, agent too:
    # the preload variant's file lacks a timeout)
    assert 'data-check="timeout-set/regex-0"' in html
    reads = [d.value for d in at.dataframe if "read" in d.value.columns]
    columns = ["constraint", "read", "in the system message", "obeyed"]
    assert {tuple(r) for df in reads for r in df[columns].values} >= {
        ("httpx-not-requests", "✓ read", "–", "✓ honored"),  # agent, rep 0
        ("httpx-not-requests", "✗ not read", "✓ preloaded", "✓ honored"),  # preload, rep 0
        ("timeout-set", "✓ read", "✓ preloaded", "✗ violated"),
    }
    codes = [c.value for c in at.code]
    assert ags.TRACES[(ags.AGENT, 0)] not in codes  # the trace is drawn, not dumped
    assert any(f"Implement it in `{ags.TARGET}`" in c for c in codes)  # the task, literally


def test_hostile_transcript_text_stays_text_and_refusals_say_why(store: None) -> None:
    at = results("Side by side", results_sbs_model=ags.MODEL, results_sbs_scenario=ags.SID)
    labels = [shown(str(e.label)) for e in at.expander if str(e.label).startswith("Round")]
    assert "Round 2 · read_file(../../etc/passwd) · ✗ refused" in labels
    assert "Round 5 · nuke_everything() · ✗ refused" in labels
    assert any(label.startswith(f"Round 3 · search_files(“{ags.HOSTILE[:40]}") for label in labels)
    warnings = [shown(str(w.value)) for w in at.warning]
    assert "Refused: '../../etc/passwd' is outside the workspace" in warnings
    assert "Refused: unknown tool" in warnings
    codes = [c.value for c in at.code]
    assert ags.README_TEXT.rstrip("\n") in codes and "{not json" in codes
    assert ags.HOSTILE in codes  # the agent's last message, literal
    # every Markdown body holding the payload keeps it inert; the search hit on the
    # timeout-set line is highlighted (code view: escaped HTML)
    assert_inert([b for b in everything(at) if "evil" in b], required=False)
    html = "\n".join(h.value for h in at.html)
    assert "<img" not in html and "<b>" not in html
    drawn = unescape(re.sub(r"<[^>]+>", "", html))  # what the code view shows
    assert f"README.md:3: {ags.HOSTILE}" in drawn


def test_an_episode_that_never_wrote_its_file_says_so(store: None) -> None:
    at = results(
        "Side by side", results_sbs_model=ags.MODEL, results_sbs_scenario=ags.SID, results_sbs_rep=1
    )
    captions = "\n".join(shown(str(c.value)) for c in at.caption)
    assert "never wrote app/fetch.py" in captions
    assert "# (the agent never wrote the named file)" in "\n".join(h.value for h in at.html)
    assert any("The agent made no tool call." in str(i.value) for i in at.info)


# --------------------------------------------------------------------------- Run


def terminal_command(at: AppTest) -> str:
    return next(c.value for c in at.code if c.value.startswith("cvb run"))


def test_the_agent_builder_adds_variants_and_the_dry_run_counts_episodes(
    studio: Path,  # noqa: F811
) -> None:
    at = open_page()
    at.multiselect(key="run_agent_rules").set_value(["agents-md", "adr", "nested"])
    at.multiselect(key="run_agent_preload").set_value([False, True])
    at.number_input(key="run_agent_steps").set_value(5)
    run(at)
    expected = [
        "agent@rules=adr,steps=5",
        "agent@steps=5",
        "agent@preload=true,steps=5",
        "agent@rules=nested,steps=5",
        "agent@rules=nested,preload=true,steps=5",
    ]
    preview = next(shown(str(c.value)) for c in at.caption if "give: agent" in c.value)
    assert set(preview.removeprefix("These settings give: ").split(", ")) == set(expected)
    assert any("Left out: rules=adr with preload" in shown(str(c.value)) for c in at.caption)
    assert "--arms cold,mandated,incentivized --runs" in terminal_command(at)  # not added yet

    click(at, "run_agent_add")
    assert any("Added 5 agent variants to the run" in str(s.value) for s in at.success)
    command = terminal_command(at)
    for name in expected:
        assert name in command
    page = "\n".join(shown(b) for b in bodies(at))
    # two scenarios × 8 arms × 3 repetitions × 3 models: 144 cells, 90 of them episodes
    assert "× 8 arms ×" in page
    assert "Of these, 90 are agent episodes (one cell each)" in page
    assert "at most 540 requests" in page  # (5 + 1) per episode
    # The cost bound leaves the episodes out by name (their later requests carry history).
    cost = next(shown(str(c.value)) for c in at.caption if str(c.value).startswith("Cost:"))
    assert "not included: " in cost
    assert all(name in cost.split("not included: ")[1] for name in expected)

    click(at, "run_agent_remove_agent@steps=5")
    assert "agent@steps=5," not in terminal_command(at)


def test_the_agent_builder_takes_a_command_and_refuses_a_comma(studio: Path) -> None:  # noqa: F811
    at = open_page()
    at.toggle(key="run_agent_use_command").set_value(True)
    run(at)
    at.text_input(key="run_agent_command").input("./my-agent.sh --fast")
    at.number_input(key="run_agent_timeout").set_value(90.0)
    run(at)
    preview = next(shown(str(c.value)) for c in at.caption if "give: agent" in c.value)
    assert preview == "These settings give: agent@command=./my-agent.sh --fast,timeout=90.0"
    click(at, "run_agent_add")
    assert "agent@command=./my-agent.sh --fast,timeout=90.0" in terminal_command(at)
    page = "\n".join(shown(b) for b in bodies(at))
    assert "run by your agent program, whose requests are its own" in page

    at.text_input(key="run_agent_command").input("./a.sh,b")
    run(at)
    assert any("cannot contain a comma" in str(w.value) for w in at.warning)
    assert at.button(key="run_agent_add").disabled


def test_the_agent_builder_sweeps_budgets_and_superseded_notes(studio: Path) -> None:  # noqa: F811
    """A budget curve and a stale drop for the agent arm, built on the page: one variant
    per budget and stale choice, as ``--memory-sweep arm=agent`` gives them."""
    at = open_page()
    at.multiselect(key="run_agent_budgets").set_value([None, 500, 2000])
    at.multiselect(key="run_agent_stale").set_value(["none", "with"])
    run(at)
    expected = {
        "agent",
        "agent@budget=500",
        "agent@budget=2000",
        "agent@stale=with",
        "agent@stale=with,budget=500",
        "agent@stale=with,budget=2000",
    }
    preview = next(shown(str(c.value)) for c in at.caption if "give: agent" in c.value)
    assert set(preview.removeprefix("These settings give: ").split(", ")) == expected
    click(at, "run_agent_add")
    assert any("Added 6 agent variants to the run" in str(s.value) for s in at.success)
    command = terminal_command(at)
    for name in expected - {"agent"}:
        assert name in command
