"""The agent's tools: every refusal as a table, bounds, read flags; nothing outside changes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest

from cvb_engine.agent.tools import (
    MAX_READ_CHARS,
    MAX_WRITE_CHARS,
    TOOL_NAMES,
    TOOLS,
    PathRefused,
    ToolBox,
    check_path,
)
from cvb_engine.agent.trace import ConstraintPlace


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_symlink():
            out[str(path.relative_to(folder))] = "link->" + os.readlink(path)
    return out


@pytest.fixture
def box(tmp_path: Path) -> ToolBox:
    """A workspace beside a folder outside it that holds a secret, and a link out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET", encoding="utf-8")
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").write_text(
        "# AGENTS.md\n\nNotes.\n\n- Decision 1 (a): Use the httpx client.\n"
        "- Decision 2 (b): Always set a timeout.\n",
        encoding="utf-8",
    )
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "escape").symlink_to(outside)
    (root / "pkg" / "leak.txt").symlink_to(outside / "secret.txt")
    places = (
        ConstraintPlace(constraint_id="a", path="AGENTS.md", line=5, end_line=5),
        ConstraintPlace(constraint_id="b", path="AGENTS.md", line=6, end_line=6),
    )
    return ToolBox(root, places)


def call(box: ToolBox, name: str, args: object, raw: str | None = None) -> tuple[object, str]:
    arguments = raw if raw is not None else json.dumps(args)
    return asyncio.run(box.call(1, "c1", name, arguments))


REFUSED = [
    ("read_file", {"path": "../outside/secret.txt"}, "'..'"),
    ("read_file", {"path": "pkg/../../outside/secret.txt"}, "'..'"),
    ("read_file", {"path": "/etc/passwd"}, "absolute"),
    ("read_file", {"path": "~/.bashrc"}, "absolute"),
    ("read_file", {"path": "C:/Windows/win.ini"}, "absolute"),
    ("read_file", {"path": "escape/secret.txt"}, "symbolic link"),
    ("read_file", {"path": "pkg/leak.txt"}, "symbolic link"),
    ("read_file", {"path": "pkg\\..\\..\\x"}, "use /"),
    ("read_file", {"path": "a\u0000b"}, "NUL"),
    ("read_file", {"path": "x" * 300}, "longer than"),
    ("read_file", {"path": "/".join(["d"] * 20)}, "deeper than"),
    ("read_file", {"path": ""}, "names no file"),
    ("read_file", {"path": "pkg"}, "is a folder"),
    ("read_file", {"path": "nothing.txt"}, "does not exist"),
    ("read_file", {"path": "AGENTS.md/x"}, "not a folder"),
    ("list_files", {"path": ".."}, "'..'"),
    ("list_files", {"path": "/"}, "absolute"),
    ("list_files", {"path": "escape"}, "symbolic link"),
    ("list_files", {"path": "AGENTS.md"}, "not a folder"),
    ("write_file", {"path": "../planted.txt", "content": "x"}, "'..'"),
    ("write_file", {"path": "/tmp/planted.txt", "content": "x"}, "absolute"),
    ("write_file", {"path": "escape/planted.txt", "content": "x"}, "symbolic link"),
    ("write_file", {"path": "pkg/leak.txt", "content": "x"}, "symbolic link"),
    ("write_file", {"path": "pkg", "content": "x"}, "not a regular file"),
    ("write_file", {"path": "big.py", "content": "x" * (MAX_WRITE_CHARS + 1)}, "at most"),
    ("write_file", {"path": "pkg/a.py"}, "needs the field 'content'"),
    ("write_file", {"content": "x"}, "needs the field 'path'"),
    ("write_file", {"path": 3, "content": "x"}, "must be a string"),
    ("write_file", {"path": "a.py", "content": ["x"]}, "must be a string"),
    ("search_files", {"query": ""}, "empty"),
    ("search_files", {"query": "q" * 300}, "longer than"),
    ("search_files", {}, "needs the field 'query'"),
    ("read_file", [1, 2], "JSON object"),
    ("read_file", "null", "JSON object"),
    ("rm_rf", {"path": "."}, "unknown tool"),
    ("", {}, "unknown tool"),
]


@pytest.mark.parametrize(
    ("name", "args", "needle"), REFUSED, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(REFUSED)]
)
def test_refusals(box: ToolBox, tmp_path: Path, name: str, args: object, needle: str) -> None:
    before = _snapshot(tmp_path)
    raw = args if isinstance(args, str) else None
    entry, text = call(box, name, args, raw)
    assert entry.refused, text  # type: ignore[attr-defined]
    assert needle in (entry.reason or ""), entry.reason  # type: ignore[attr-defined]
    assert text.startswith("refused: ")
    assert "TOP-SECRET" not in text
    assert _snapshot(tmp_path) == before  # nothing changed, inside or out
    assert not Path("/tmp/planted.txt").exists()


@pytest.mark.parametrize(
    "raw",
    ["{not json", "", "[", '{"path": ', "x" * 20_000],
    ids=["bad", "empty", "open", "cut", "huge"],
)
def test_arguments_that_are_not_json_are_refused(box: ToolBox, raw: str) -> None:
    entry, text = call(box, "read_file", None, raw)
    assert entry.refused and ("not JSON" in text or "longer than" in text)  # type: ignore[attr-defined]
    assert entry.parsed is None  # type: ignore[attr-defined]


def test_run_tests_takes_no_arguments(box: ToolBox) -> None:
    entry, text = call(box, "run_tests", None, "")
    assert not entry.refused and "not available" in text  # type: ignore[attr-defined]


def test_check_path_normalises() -> None:
    assert check_path("./pkg//a.py") == "pkg/a.py"
    assert check_path(".", root_ok=True) == ""
    with pytest.raises(PathRefused):
        check_path(".")


def test_list_read_write_search(box: ToolBox) -> None:
    entry, text = call(box, "list_files", {"path": "."})
    assert text.splitlines() == ["AGENTS.md", "escape", "pkg/"]  # a link is not a folder
    entry, text = call(box, "write_file", {"path": "pkg/new/mod.py", "content": "x = 1\n"})
    assert not entry.refused and entry.path == "pkg/new/mod.py"  # type: ignore[attr-defined]
    assert (box.root / "pkg/new/mod.py").read_text() == "x = 1\n"
    entry, text = call(box, "read_file", {"path": "pkg/new/mod.py"})
    assert text == "x = 1\n"
    entry, text = call(box, "search_files", {"query": "HTTPX"})
    assert text == "AGENTS.md:5: - Decision 1 (a): Use the httpx client."
    assert entry.shown == ("a",)  # type: ignore[attr-defined]
    entry, text = call(box, "search_files", {"query": "nowhere-to-be-found"})
    assert "no line contains" in text and entry.shown == ()  # type: ignore[attr-defined]


def test_read_flags_come_from_what_was_shown(box: ToolBox) -> None:
    entry, _ = call(box, "read_file", {"path": "AGENTS.md"})
    assert entry.shown == ("a", "b")  # type: ignore[attr-defined]
    entry, _ = call(box, "read_file", {"path": "./AGENTS.md"})
    assert entry.path == "AGENTS.md" and entry.shown == ("a", "b")  # type: ignore[attr-defined]
    # a rules file the agent rewrote no longer holds the rules
    call(box, "write_file", {"path": "AGENTS.md", "content": "nothing\n" * 10})
    entry, _ = call(box, "read_file", {"path": "AGENTS.md"})
    assert entry.shown == ()  # type: ignore[attr-defined]


def test_a_long_file_is_cut_and_says_so(box: ToolBox) -> None:
    lines = ["filler line"] * 3000 + ["- Decision 9 (late): at the very end"]
    (box.root / "LONG.md").write_text("\n".join(lines), encoding="utf-8")
    box.places = (
        *box.places,
        ConstraintPlace(constraint_id="late", path="LONG.md", line=3001, end_line=3001),
    )
    entry, text = call(box, "read_file", {"path": "LONG.md"})
    assert "[cut: LONG.md has" in text and len(text) < MAX_READ_CHARS + 200
    assert "late" not in entry.shown  # type: ignore[attr-defined]  # never shown, not read
    entry, text = call(box, "search_files", {"query": "very end"})
    assert entry.shown == ("late",)  # type: ignore[attr-defined]


def test_search_is_bounded(box: ToolBox) -> None:
    (box.root / "many.txt").write_text(
        "\n".join(f"needle {i} " + "z" * 1000 for i in range(200)), encoding="utf-8"
    )
    (box.root / "huge.txt").write_text("needle\n" * 100_000, encoding="utf-8")
    _entry, text = call(box, "search_files", {"query": "needle"})
    lines = text.splitlines()
    assert len(lines) == 42 and lines[-2] == "[160 more matching lines not shown]"
    assert lines[-1] == "[1 files over 256000 bytes not searched]"
    assert all(len(line) < 300 for line in lines)
    assert "TOP-SECRET" not in text  # links are not followed


def test_workspace_caps(box: ToolBox) -> None:
    for i in range(64):
        entry, _ = call(box, "write_file", {"path": f"f{i}.txt", "content": "x"})
        assert not entry.refused  # type: ignore[attr-defined]
    entry, text = call(box, "write_file", {"path": "one-more.txt", "content": "x"})
    assert entry.refused and "at most 64 files" in text  # type: ignore[attr-defined]
    entry, _ = call(box, "write_file", {"path": "f1.txt", "content": "rewrite is fine"})
    assert not entry.refused  # type: ignore[attr-defined]


def test_trace_entries_are_bounded(box: ToolBox) -> None:
    content = "y" * (MAX_WRITE_CHARS - 10)
    entry, _ = call(box, "write_file", {"path": "a.py", "content": content})
    assert not entry.refused  # type: ignore[attr-defined]
    assert entry.arguments_cut and len(entry.arguments) <= 4_000  # type: ignore[attr-defined]
    assert len(entry.parsed["content"]) <= 2_000  # type: ignore[attr-defined,index]
    entry, text = call(box, "read_file", {"path": "a.py"})
    assert len(text) == len(content) and entry.result_cut  # type: ignore[attr-defined]


def test_the_tool_schema_has_the_documented_names() -> None:
    names = [t["function"]["name"] for t in TOOLS]
    assert names == list(TOOL_NAMES)
    args = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}
    assert args == {
        "list_files": ["path"],
        "read_file": ["path"],
        "search_files": ["query"],
        "write_file": ["path", "content"],
        "run_tests": [],
    }
