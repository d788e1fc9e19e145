"""Scenario loading: valid files load; every problem names file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvb_engine import scenario as scenario_module
from cvb_engine.scenario import ScenarioError, load_file, load_library, load_text


def test_valid_scenario_loads_with_lines_and_hash(scenario_dir: Path) -> None:
    item = load_file(scenario_dir / "library-choice" / "http-client-choice.yaml")
    assert item.scenario.id == "http-client-choice"
    assert [c.id for c in item.scenario.constraints] == ["httpx-not-requests", "timeout-set"]
    assert item.line_of("constraints", 1, "text") == 27
    assert len(item.sha256) == 64
    assert item.scenario.constraints[0].check_ids() == ["regex-0", "regex-1"]


@pytest.mark.parametrize(
    ("edit", "line", "field", "fragment"),
    [
        pytest.param(("version: 1", "version: one"), 2, "version", "integer", id="version-type"),
        pytest.param(
            ("title: Fetch JSON with retries\n", ""),
            1,
            "title",
            "Field required",
            id="missing-title",
        ),
        pytest.param(
            ("category: library-choice", "category: misc"),
            3,
            "category",
            "unknown category",
            id="category",
        ),
        pytest.param(
            ("- kind: regex\n        require", "- kind: regexp\n        require"),
            15,
            "constraints[0].checks[1]",
            "unknown check kind",
            id="kind",
        ),
        pytest.param(
            ("require: 'timeout", "require: '(timeout"),
            30,
            "constraints[1].checks[0].require",
            "does not compile",
            id="regex-compile",
        ),
        pytest.param(
            ("id: timeout-set", "id: Timeout_Set"),
            26,
            "constraints[1].id",
            "lowercase",
            id="constraint-id",
        ),
        pytest.param(
            ("version: 1", "version: 1\nauthor: me"), 3, "author", "Extra inputs", id="extra-field"
        ),
    ],
)
def test_schema_errors_name_line_and_field(
    valid_text: str, edit: tuple[str, str], line: int, field: str, fragment: str
) -> None:
    assert edit[0] in valid_text
    with pytest.raises(ScenarioError) as info:
        load_text(valid_text.replace(edit[0], edit[1], 1), "s/x.yaml")
    problems = info.value.problems
    assert any(p.line == line and p.field == field and fragment in p.message for p in problems), (
        problems
    )


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(b"id: a\nid: b\n", "duplicate key 'id'", id="duplicate-key"),
        pytest.param(
            b"id: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
            "not allowed",
            id="python-tag",
        ),
        pytest.param(b"a: &a [1, 2]\nb: [*a, *a]\n", "aliases", id="alias"),
        pytest.param(b"id: caf\xe9\n", "UTF-8", id="latin1"),
        pytest.param(b"\x00\x01\x02garbage", "binary", id="nul"),
        pytest.param(b"id: a\x07\n", "control character", id="control"),
        pytest.param(b"- a\n- b\n", "mapping", id="list-top"),
        pytest.param(b"", "empty", id="empty"),
        pytest.param(b"id: [unclosed\n", "YAML syntax", id="syntax"),
    ],
)
def test_unsafe_or_broken_yaml_is_refused(raw: bytes, fragment: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_text(raw, "bad.yaml")
    assert fragment in str(info.value)
    assert all(p.path == "bad.yaml" and p.line >= 0 for p in info.value.problems)


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param('!!float ""', "cannot read '' as float", id="empty-float"),
        pytest.param("!!int one", "cannot read 'one' as int", id="word-int"),
        pytest.param("!!bool maybe", "cannot read 'maybe' as bool", id="word-bool"),
        pytest.param('!!int "0x"', "cannot read '0x' as int", id="hex-without-digits"),
    ],
)
def test_values_the_constructor_cannot_read_are_reported_at_their_line(
    value: str, fragment: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fast:
        monkeypatch.setattr(scenario_module, "_FAST_LOADER", None)
    elif scenario_module._FAST_LOADER is None:
        pytest.skip("PyYAML built without libyaml")
    raw = f"id: a\nversion: 1\ntitle: x\nnotes:\n  - {value}\n".encode()
    with pytest.raises(ScenarioError) as info:
        load_text(raw, "bad.yaml")
    (problem,) = info.value.problems
    assert (problem.path, problem.line) == ("bad.yaml", 5)
    assert problem.message.startswith("YAML value: ")
    assert fragment in problem.message


@pytest.mark.parametrize(
    "value",
    ["9" * 5000, "0x" + "f" * 3600, "0" + "7" * 4800, "1:" + "59:" * 1500 + "59"],
    ids=["decimal", "hex", "octal", "base-60"],
)
def test_integers_too_long_to_print_are_refused_at_their_line(value: str) -> None:
    raw = f"id: a\nversion: 1\ncategory: {value}\n".encode()
    with pytest.raises(ScenarioError) as info:
        load_text(raw, "bad.yaml")
    (problem,) = info.value.problems
    assert (problem.line, problem.code) == (3, "E001")
    assert problem.message == f"an integer of {len(value):,} characters (at most 100)"


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize("char", ["\x80", "\x9f", "\ufffe"])
def test_a_character_yaml_refuses_is_reported_at_its_line(
    char: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fast:
        monkeypatch.setattr(scenario_module, "_FAST_LOADER", None)
    raw = f"id: a\ntitle: {'é' * 300}\nversion: 1\nnotes: a{char}b\n".encode()
    with pytest.raises(ScenarioError) as info:
        load_text(raw, "bad.yaml")
    (problem,) = info.value.problems
    assert problem.line == 4
    assert problem.message == f"YAML error: character #x{ord(char):04x} is not allowed"


def test_python_tag_is_never_executed(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    payload = f"id: !!python/object/apply:os.system ['touch {sentinel}']\n".encode()
    with pytest.raises(ScenarioError):
        load_text(payload, "bad.yaml")
    assert not sentinel.exists()


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 30)]
    with pytest.raises(ScenarioError, match="aliases"):
        load_text("\n".join(lines), "bomb.yaml")


def test_load_library_collects_all_problems(scenario_dir: Path) -> None:
    (scenario_dir / "library-choice" / "broken.yaml").write_text("id: [\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_library(scenario_dir)
    assert "broken.yaml:2" in str(info.value)
