"""The project-memory pool: loading with file:line errors, and the deterministic draw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from cvb_engine.memory_pool import EntryKind, Pool, PoolError, draw, load_pool

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "scenarios" / "memory" / "pool.yaml"


def write_pool(tmp_path: Path, body: str, name: str = "pool.yaml") -> Path:
    folder = tmp_path / "memory"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


SMALL = """\
    version: 1
    entries:
      - id: ops-001
        kind: ops
        text: The on-call rotation changes hands on Mondays at eleven in the morning.
      - id: data-001
        kind: data
        text: Loan history is kept for seven years for the councils' grant audits.
      - id: naming-001
        kind: naming
        text: Services are named after things found around an old harbour house.
    """


@pytest.fixture(scope="module")
def shipped() -> Pool:
    return load_pool(SHIPPED)


# --------------------------------------------------------------------------- loading


def test_load_keeps_entries_path_lines_and_hash(tmp_path: Path) -> None:
    path = write_pool(tmp_path, SMALL)
    pool = load_pool(path)
    assert [e.id for e in pool.entries] == ["ops-001", "data-001", "naming-001"]
    assert pool.entries[1].kind is EntryKind.DATA
    assert pool.path == path
    assert len(pool.sha256) == 64
    assert pool.line_of("entries", 1, "text") == 8
    assert pool.line_of("entries", 2) == 9


@pytest.mark.parametrize(
    ("body", "line", "code", "needle"),
    [
        pytest.param(
            "version: 1\nentries:\n  - id: ops-001\n    kind: ops\n    text: [unclosed\n",
            6,
            "E001",
            "YAML syntax",
            id="yaml-syntax",
        ),
        pytest.param(
            "version: 1\nentries:\n  - id: ops-001\n    kind: ops\n",
            3,
            "E002",
            "entries[0].text",
            id="missing-text",
        ),
        pytest.param(
            "version: 1\nentries:\n  - id: Ops_1\n    kind: ops\n    text: A fact.\n",
            3,
            "E002",
            "entries[0].id",
            id="bad-id",
        ),
        pytest.param(
            "version: 1\nentries:\n  - id: ops-001\n    kind: ops\n    text: A fact.\n    why: x\n",
            6,
            "E002",
            "why",
            id="unknown-field",
        ),
        pytest.param(
            "version: 1\nentries:\n  - id: ops-001\n    kind: gossip\n    text: A fact.\n",
            4,
            "E023",
            "unknown kind 'gossip'",
            id="unknown-kind",
        ),
        pytest.param("version: 2\nentries: []\n", 1, "E002", "version", id="version"),
        pytest.param("- just\n- a list\n", 1, "E002", "found list", id="not-a-mapping"),
        pytest.param(
            "version: 1\nentries:\n  - &a {id: ops-001, kind: ops, text: x}\n  - *a\n",
            4,
            "E001",
            "aliases",
            id="alias",
        ),
    ],
)
def test_load_errors_name_file_and_line(
    tmp_path: Path, body: str, line: int, code: str, needle: str
) -> None:
    path = write_pool(tmp_path, body)
    with pytest.raises(PoolError) as caught:
        load_pool(path)
    problems = caught.value.problems
    assert any(p.line == line and p.code == code for p in problems), problems
    assert f"{path}:{line}: {code}" in str(caught.value)
    assert needle in str(caught.value)


def test_missing_file_is_a_pool_error(tmp_path: Path) -> None:
    with pytest.raises(PoolError, match="cannot read"):
        load_pool(tmp_path / "memory" / "absent.yaml")


# --------------------------------------------------------------------------- the shipped pool


def test_shipped_pool_size_and_balance(shipped: Pool) -> None:
    counts = Counter(e.kind for e in shipped.entries)
    assert len(shipped.entries) >= 300
    assert set(counts) == set(EntryKind)
    assert min(counts.values()) >= 35, counts


# --------------------------------------------------------------------------- draw


def test_draw_same_seed_same_entries(shipped: Pool) -> None:
    first = draw(shipped, 50, "http-client-choice|load=50")
    assert first == draw(shipped, 50, "http-client-choice|load=50")
    assert len({e.id for e in first}) == 50


@pytest.mark.parametrize(
    ("seed_a", "seed_b"),
    [
        pytest.param("http-client-choice|load=50", "http-client-choice|load=51", id="params"),
        pytest.param("http-client-choice|load=50", "report-copy-pathlib|load=50", id="scenario"),
        pytest.param("a", "b", id="one-letter"),
    ],
)
def test_draw_different_seeds_differ(shipped: Pool, seed_a: str, seed_b: str) -> None:
    assert [e.id for e in draw(shipped, 20, seed_a)] != [e.id for e in draw(shipped, 20, seed_b)]


def test_draw_is_a_prefix_of_a_larger_draw(shipped: Pool) -> None:
    """A larger load adds distractors after the smaller one's, in the same order."""
    assert draw(shipped, 100, "s|x")[:10] == draw(shipped, 10, "s|x")


def test_draw_whole_pool_is_a_permutation(shipped: Pool) -> None:
    everything = draw(shipped, len(shipped.entries), "all")
    assert sorted(e.id for e in everything) == sorted(e.id for e in shipped.entries)
    assert draw(shipped, 0, "none") == []


@pytest.mark.parametrize("n", [-1, 10_000], ids=["negative", "beyond-pool"])
def test_draw_out_of_range_is_a_clear_error(shipped: Pool, n: int) -> None:
    with pytest.raises(ValueError, match=rf"cannot draw {n} entries .* of {len(shipped.entries)}"):
        draw(shipped, n, "seed")


def test_draw_pinned_values(tmp_path: Path) -> None:
    """The draw of a fixed pool under a fixed seed is part of stored results: pinned."""
    body = "version: 1\nentries:\n" + "".join(
        f"  - id: ops-{i:03d}\n    kind: ops\n    text: Entry number {i} of the pinned pool.\n"
        for i in range(1, 11)
    )
    pool = load_pool(write_pool(tmp_path, body))
    assert [e.id for e in draw(pool, 4, "pinned|seed")] == PINNED


PINNED = ["ops-006", "ops-005", "ops-001", "ops-003"]

_CHILD = """
import json, sys
from cvb_engine.memory_pool import draw, load_pool
pool = load_pool(sys.argv[1])
print(json.dumps([[e.id for e in draw(pool, 30, seed)] for seed in sys.argv[2:]]))
"""


def test_draw_is_the_same_in_other_processes(shipped: Pool) -> None:
    seeds = ["http-client-choice|load=30", "oauth-token-cache|position=spread"]
    expected = [[e.id for e in draw(shipped, 30, seed)] for seed in seeds]
    for hash_seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(SHIPPED), *seeds],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
            check=True,
        )
        assert json.loads(out.stdout) == expected, hash_seed
