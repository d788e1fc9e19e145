"""Lint of the project-memory pool (E020–E023) and how it sits beside the scenario lint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cvb_engine.lint import (
    IMPERATIVE_WORDS,
    Finding,
    checked_names,
    lint_paths,
    lint_pool,
    lint_pool_file,
)
from cvb_engine.memory_pool import discover_pools, load_pool
from cvb_engine.scenario import LoadedScenario, discover, load_library

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
SHIPPED_POOL = SCENARIOS / "memory" / "pool.yaml"

GOOD = "The team moved the nightly export to 02:00 UTC after the March load spike."
OTHER = "Kiln's thumbnail workers scale on queue depth since the Hailstorm clean-up of 2023."


@pytest.fixture(scope="module")
def library() -> list[LoadedScenario]:
    return list(load_library(SCENARIOS).values())


def pool_file(tmp_path: Path, entries: list[tuple[str, str, str]]) -> Path:
    """A pool file of (id, kind, text) entries; texts are JSON strings, which YAML reads."""
    folder = tmp_path / "memory"
    folder.mkdir(exist_ok=True)
    path = folder / "pool.yaml"
    body = "version: 1\nentries:\n" + "".join(
        f"  - id: {eid}\n    kind: {kind}\n    text: {json.dumps(text)}\n"
        for eid, kind, text in entries
    )
    path.write_text(body, encoding="utf-8")
    return path


def findings_for(
    tmp_path: Path, library: list[LoadedScenario], *texts: str, ids: tuple[str, ...] = ()
) -> list[Finding]:
    ids = ids or tuple(f"ops-{i:03d}" for i in range(1, len(texts) + 1))
    return lint_pool_file(
        pool_file(tmp_path, [(eid, "ops", t) for eid, t in zip(ids, texts, strict=True)]),
        library,
    )


# Each case: the entries, then the code expected on the last entry (None: lints clean).
CASES = [
    pytest.param([GOOD], None, id="good-declarative"),
    pytest.param([GOOD, OTHER], None, id="good-two-entries"),
    # E020: the words E010 refuses
    pytest.param(
        ["Deploys must pause from 20 December after the 2022 holiday outage."], "E020", id="must"
    ),
    pytest.param(
        ["The export should run at 02:00 UTC since the March load spike."], "E020", id="should"
    ),
    pytest.param(
        ["Nobody is allowed to deploy on Fridays; it is a rule since 2023."], "E020", id="rule"
    ),
    pytest.param(
        ["Library staff don't have to approve the weekly catalogue changes any more."],
        "E020",
        id="dont",
    ),
    # E021: names the checks look for, whole words only, any case
    pytest.param(
        ["The catalogue squad called the partner feeds with requests until 2021."],
        "E021",
        id="module-requests",
    ),
    pytest.param(
        ["Ferry reads its partner feeds from YAML files since the Utrecht go-live."],
        "E021",
        id="module-yaml-any-case",
    ),
    pytest.param(
        ["Kiln ran ImageMagick through subprocess for its thumbnails until 2024."],
        "E021",
        id="module-subprocess",
    ),
    pytest.param(
        ["Gatehouse stored member PINs with bcrypt after the 2023 security review."],
        "E021",
        id="module-bcrypt",
    ),
    pytest.param(
        ["Digests in ferry moved to hashlib during the 2023 export rewrite."],
        "E021",
        id="module-hashlib",
    ),
    pytest.param(
        ["The importer paused with time.sleep between batches until the 2024 spike."],
        "E021",
        id="dotted-call",
    ),
    pytest.param(
        ["Workers set up their log format with basicConfig after the 2024 migration."],
        "E021",
        id="distinctive-component",
    ),
    pytest.param(
        ["Progress of the nightly import went to print statements until 2023."],
        "E021",
        id="builtin-print",
    ),
    pytest.param(
        ["Durations on the tally dashboard come from perf_counter since 2024."],
        "E021",
        id="distinctive-last-component",
    ),
    # E021: a regex check's own pattern matches the text
    pytest.param(
        ["The reporting tools copy whole folders with copytree since the 2023 audit."],
        "E021",
        id="regex-pattern",
    ),
    pytest.param(
        ["Tests fake the partner endpoints with respx since the 2025 CI change."],
        "E021",
        id="regex-pattern-2",
    ),
    # not names: longer words and singular forms
    pytest.param(
        ["The timesheet export for volunteers moved to Mondays after the 2023 review."],
        None,
        id="longer-word-not-a-name",
    ),
    pytest.param(
        ["Every pull request title follows Conventional Commits since the 2022 cleanup."],
        None,
        id="singular-not-a-module",
    ),
    # E022: ids and texts told twice
    pytest.param([GOOD, GOOD.upper().replace(" ", "  ")], "E022", id="same-text-case-spacing"),
    pytest.param(
        [GOOD, GOOD.replace(".", "!").replace(" UTC", ", UTC")], "E022", id="same-text-punctuation"
    ),
    pytest.param([GOOD, GOOD.replace("02:00", "03:00")], "E022", id="near-duplicate"),
    # E023: length
    pytest.param(["Deploys pause in December."], "E023", id="too-short"),
    pytest.param(
        [" ".join(["The nightly export moved after the March load spike"] * 6)],
        "E023",
        id="too-long",
    ),
]


@pytest.mark.parametrize(("texts", "code"), CASES)
def test_pool_rules(
    tmp_path: Path, library: list[LoadedScenario], texts: list[str], code: str | None
) -> None:
    findings = findings_for(tmp_path, library, *texts)
    if code is None:
        assert findings == []
        return
    pool = load_pool(tmp_path / "memory" / "pool.yaml")
    last = len(texts) - 1
    assert {f.code for f in findings} == {code}, findings
    assert all(f.line == pool.line_of("entries", last, "text") for f in findings), findings
    assert all(pool.entries[last].id in f.message for f in findings)


def test_duplicate_id_points_at_the_second(tmp_path: Path, library: list[LoadedScenario]) -> None:
    findings = findings_for(tmp_path, library, GOOD, OTHER, ids=("ops-001", "ops-001"))
    pool = load_pool(tmp_path / "memory" / "pool.yaml")
    assert [(f.code, f.line) for f in findings] == [("E022", pool.line_of("entries", 1, "id"))]
    assert f"first at line {pool.line_of('entries', 0, 'id')}" in findings[0].message


def test_unknown_kind_is_e023_with_its_line(tmp_path: Path, library: list[LoadedScenario]) -> None:
    path = pool_file(tmp_path, [("ops-001", "ops", GOOD), ("ops-002", "gossip", OTHER)])
    findings = lint_pool_file(path, library)
    assert [(f.code, f.line) for f in findings] == [("E023", 7)]
    assert "gossip" in findings[0].message


def test_e021_names_the_constraint(tmp_path: Path, library: list[LoadedScenario]) -> None:
    [finding] = findings_for(tmp_path, library, "Ferry moved its partner feeds to tomllib in 2024.")
    assert "'tomllib'" in finding.message
    assert "toml-settings-loader/tomllib-stdlib" in finding.message


def test_e020_uses_the_e010_list(tmp_path: Path, library: list[LoadedScenario]) -> None:
    """Every word E010 refuses in a constraint, E020 refuses in an entry."""
    texts = [
        f"The deploy freeze {w} apply over the holidays since the 2022 outage."
        for w in IMPERATIVE_WORDS
    ]
    ids = tuple(f"ops-{i:03d}" for i in range(1, len(texts) + 1))
    findings = findings_for(tmp_path, library, *texts, ids=ids)
    flagged = {f.message.split("'")[1] for f in findings if f.code == "E020"}
    assert flagged == set(ids)


@pytest.mark.parametrize(
    "name",
    [
        "requests",
        "yaml",
        "subprocess",
        "hashlib",
        "bcrypt",
        "time.sleep",
        "print",
        "basicconfig",
        "smtplib",
    ],
)
def test_checked_names_include(library: list[LoadedScenario], name: str) -> None:
    assert name in checked_names(library)


@pytest.mark.parametrize(
    "word",
    # suffix-wildcard components that are plain words, and the condition keys of `where`
    ["get", "post", "info", "session", "client", "same_function_as", "keyword_in", "timeout"],
)
def test_checked_names_leave_out_plain_words(library: list[LoadedScenario], word: str) -> None:
    assert word not in checked_names(library)


# --------------------------------------------------------------------------- the shipped pool


def test_shipped_pool_lints_clean(library: list[LoadedScenario]) -> None:
    pool = load_pool(SHIPPED_POOL)
    assert len(pool.entries) >= 300
    assert lint_pool(pool, library) == []


def test_shipped_entries_vary_in_length() -> None:
    lengths = [len(e.text.split()) for e in load_pool(SHIPPED_POOL).entries]
    assert min(lengths) <= 10 and max(lengths) >= 35


# --------------------------------------------------------------------------- discovery and `cvb lint`


def test_discover_leaves_the_pool_out() -> None:
    found = discover([SCENARIOS])
    assert all("memory" not in p.parts for p in found)
    assert discover([SHIPPED_POOL]) == []
    assert [p.resolve() for p in discover_pools([SCENARIOS])] == [SHIPPED_POOL.resolve()]
    assert [p.resolve() for p in discover_pools([SHIPPED_POOL])] == [SHIPPED_POOL.resolve()]
    assert discover_pools([SCENARIOS / "security"]) == []


def test_lint_paths_lints_a_pool_named_alone(tmp_path: Path) -> None:
    path = pool_file(
        tmp_path, [("ops-001", "ops", "Deploys must pause over the holidays after 2022.")]
    )
    for given in (path, tmp_path):
        findings = lint_paths([given])
        assert [(f.path, f.code) for f in findings] == [(str(path), "E020")], given


def test_cvb_lint_scenarios_counts_scenarios_only() -> None:
    scenario_files = [
        p for p in SCENARIOS.rglob("*.yaml") if "memory" not in p.relative_to(SCENARIOS).parts
    ]
    out = subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", "lint", "scenarios"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary = re.search(r"(\d+) file\(s\): (\d+) error\(s\)", out.stderr)
    assert summary is not None, out.stderr
    assert (int(summary.group(1)), int(summary.group(2))) == (len(scenario_files), 0)


def test_pool_is_checked_against_the_whole_library(tmp_path: Path) -> None:
    """Linting one category with the pool still checks the pool against every constraint."""
    lib = tmp_path / "lib"
    for rel in ("library-choice/http-client-choice.yaml", "security/shell-command-runner.yaml"):
        (lib / rel).parent.mkdir(parents=True, exist_ok=True)
        (lib / rel).write_bytes((SCENARIOS / rel).read_bytes())
    path = pool_file(
        lib,
        [
            (
                "ops-001",
                "ops",
                "Kiln ran ImageMagick through subprocess for its thumbnails until 2024.",
            )
        ],
    )
    findings = lint_paths([lib / "library-choice", path], shipped=False)
    assert [f.code for f in findings if f.path == str(path)] == ["E021"]
    assert "shell-command-runner" in next(f.message for f in findings if f.path == str(path))
