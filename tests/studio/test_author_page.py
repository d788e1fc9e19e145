"""The Author page, driven through Streamlit's AppTest against a temporary library and store.

Every AppTest run uses the default timeout (3 s): a run that hangs, e.g. on a
catastrophic regex, fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cvb_engine import CVB_CATEGORIES, authoring, lint_paths, registry

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "studio" / "streamlit_app.py"
HTTP_KEY = "library:library-choice/http-client-choice.yaml"
FACT = "The team standardized on httpx after requests caused the March socket-exhaustion incident."
ORDER = "The team must use httpx after requests caused the March socket-exhaustion incident."
VIOLATING = "import requests\nrequests.get(url, timeout=5)\n"


@pytest.fixture
def library(scenario_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A one-scenario library (tests/conftest.py VALID_SCENARIO) and an empty SQLite store."""
    monkeypatch.setenv("CVB_SCENARIOS", str(scenario_dir))
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{tmp_path / 'cvb.db'}")
    monkeypatch.delenv("CVB_DRAFTS", raising=False)
    return scenario_dir


def start() -> AppTest:
    at = AppTest.from_file(str(APP)).run()
    assert not at.exception, at.exception
    return at


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_scenario(at: AppTest, key: str = HTTP_KEY) -> AppTest:
    at.selectbox(key="author_pick").select(key)
    run(at)
    at.button(key="author_open").click()
    return run(at)


def show(at: AppTest, view: str) -> AppTest:
    at.session_state["author_view"] = view
    return run(at)


def edit(at: AppTest, key: str, text: str) -> AppTest:
    at.text_area(key=key).input(text)
    return run(at)


def html(at: AppTest) -> str:
    return "\n".join(h.value for h in at.html)


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown]
    parts += [c.value for c in at.caption]
    for kind in ("success", "error", "warning", "info"):
        parts += [e.value for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


# --------------------------------------------------------------------------- the main flow


def test_open_break_fix_check_save_and_reload(library: Path) -> None:
    path = library / "library-choice" / "http-client-choice.yaml"
    original = path.read_text(encoding="utf-8")
    at = open_scenario(start())
    assert at.session_state["author_view"] == "Editor"
    assert at.text_area(key="author_yaml").value == original
    assert 'class="f error"' not in html(at)

    # Imperative wording: E010 on the constraint text's line, with that line quoted.
    broken = original.replace(FACT, ORDER)
    edit(at, "author_yaml", broken)
    findings = html(at)
    assert 'data-code="E010"' in findings
    assert f'data-line="{line_of(broken, "text: >-")}"' in findings
    assert "The team must use httpx" in findings
    assert at.button(key="author_save").disabled
    assert "blocked" in texts(at)

    # Fixed again: no error left, saving is possible.
    edit(at, "author_yaml", original)
    assert 'class="f error"' not in html(at)
    assert not at.button(key="author_save").disabled

    # Violating code in the playground: the failing check is named and its span marked.
    show(at, "Check playground")
    edit(at, "author_code", VIOLATING)
    marked = html(at)
    assert '<mark class="v"' in marked
    assert 'data-check="httpx-not-requests/regex-0"' in marked
    verdicts = texts(at)
    assert "Violates 1 of 2 constraint(s)" in verdicts
    assert "**fail**] `httpx-not-requests/regex-0`" in verdicts
    assert "pass] `timeout-set/regex-0`" in verdicts

    # Save back to its own file: no confirmation needed for the file that was opened.
    show(at, "Editor")
    edit(at, "author_yaml", original.replace("version: 1", "version: 2"))
    at.button(key="author_save").click()
    run(at)
    assert "version: 2" in path.read_text(encoding="utf-8")
    assert at.success and "Saved the scenario" in at.success[0].value
    assert not list(library.rglob("*.tmp"))

    # A fresh session finds the saved file in the library and opens it.
    again = start()
    table = again.dataframe[0].value
    assert list(table["id"]) == ["http-client-choice"]
    open_scenario(again)
    assert "version: 2" in again.text_area(key="author_yaml").value
    # The playground text survived the tab switches of the first session.
    assert at.session_state["author_code"] == VIOLATING


def test_new_scenario_from_template_to_lint_clean_file(library: Path) -> None:
    at = start()
    at.text_input(key="author_new_id").input("toml-settings-loader")
    at.selectbox(key="author_new_category").select("encoding-io")
    at.selectbox(key="author_new_template").select("Regex checks")
    run(at)
    at.button(key="author_create").click()
    run(at)
    assert at.session_state["author_view"] == "Editor"
    text = at.text_area(key="author_yaml").value
    assert "id: toml-settings-loader" in text and "category: encoding-io" in text
    assert 'class="f error"' not in html(at)
    assert "scenarios/encoding-io/toml-settings-loader.yaml" in texts(at)

    at.button(key="author_save").click()
    run(at)
    saved = library / "encoding-io" / "toml-settings-loader.yaml"
    assert saved.is_file()
    assert not [f for f in lint_paths([saved], shipped=False) if f.severity == "error"]
    # Now it is the author's own file: saving again needs no confirmation.
    assert not at.checkbox  # no overwrite question
    assert not at.button(key="author_save").disabled


@pytest.mark.parametrize("template", ["Regex checks", "Python AST checks"])
def test_templates_are_lint_clean(template: str, tmp_path: Path) -> None:
    from cvb_engine import TEMPLATES

    for category in CVB_CATEGORIES:
        text = TEMPLATES[template].render("fresh-scenario", category)
        lint = authoring.lint_editor(text, tmp_path, [], tmp_path / "x.yaml")
        assert lint.item is not None
        assert [f.code for f in lint.findings if f.code != "E012"] == [], lint.findings


# --------------------------------------------------------------------------- saving rules


def test_save_refused_on_lint_errors_but_draft_saved_outside_library(library: Path) -> None:
    path = library / "library-choice" / "http-client-choice.yaml"
    original = path.read_text(encoding="utf-8")
    at = open_scenario(start())
    broken = original.replace(FACT, ORDER)
    edit(at, "author_yaml", broken)
    assert at.button(key="author_save").disabled
    # The engine-side guard refuses too, whatever the button says.
    outcome = authoring.save_to_library(broken, library, [], {})
    assert outcome.status == "refused" and "lint reports 1 error" in outcome.message
    assert path.read_text(encoding="utf-8") == original

    at.button(key="author_save_draft").click()
    run(at)
    draft = library.parent / "data" / "drafts" / "http-client-choice.yaml"
    assert draft.read_text(encoding="utf-8") == broken
    assert path.read_text(encoding="utf-8") == original
    # Drafts live outside the linted tree: the library still lints clean.
    assert not [f for f in lint_paths([library], shipped=False) if f.severity == "error"]
    # The draft is listed in the library table.
    show(at, "Library")
    assert "draft" in list(at.dataframe[0].value["where"])

    # Fixed and saved into the library, the draft has served its purpose and goes.
    show(at, "Editor")
    edit(at, "author_yaml", original.replace("version: 1", "version: 2"))
    at.button(key="author_save").click()
    run(at)
    assert "version: 2" in path.read_text(encoding="utf-8")
    assert not draft.exists()
    assert "The draft" in at.success[0].value and "was removed" in at.success[0].value


def test_overwriting_another_file_needs_confirmation(library: Path, valid_text: str) -> None:
    other = library / "library-choice" / "http-client-copy.yaml"
    other.write_text(valid_text.replace("id: http-client-choice", "id: http-client-copy"))
    at = open_scenario(start(), "library:library-choice/http-client-copy.yaml")
    # Renaming the copy to the first scenario's id targets that existing file.
    edit(at, "author_yaml", valid_text.replace("version: 1", "version: 7"))
    assert at.button(key="author_save").disabled
    assert "already exists" in texts(at)
    assert at.checkbox(key="author_overwrite").value is False

    at.checkbox(key="author_overwrite").check()
    run(at)
    assert not at.button(key="author_save").disabled
    at.button(key="author_save").click()
    run(at)
    assert "version: 7" in (library / "library-choice" / "http-client-choice.yaml").read_text()
    assert "id: http-client-copy" in other.read_text()  # the opened file is left alone


def test_file_changed_on_disk_needs_confirmation(library: Path) -> None:
    path = library / "library-choice" / "http-client-choice.yaml"
    at = open_scenario(start())
    path.write_text(path.read_text().replace("version: 1", "version: 3"))  # someone else
    edit(
        at, "author_yaml", at.text_area(key="author_yaml").value.replace("title: F", "title: Now f")
    )
    assert at.button(key="author_save").disabled
    assert "changed on disk since you opened it" in texts(at)


def test_new_id_of_existing_scenario_is_refused(library: Path) -> None:
    at = start()
    at.text_input(key="author_new_id").input("http-client-choice")
    run(at)
    at.button(key="author_create").click()
    run(at)
    assert at.error and "exists" in at.error[0].value
    assert at.session_state["author_doc"] is None


@pytest.mark.parametrize(
    "bad_id",
    [
        "../../etc/evil",
        "/etc/passwd",
        "a/b",
        "..",
        "Upper",
        "x.yaml",
        "",
        "a" * 81,
        "a--b",
        "x\x00y",
    ],
    ids=[
        "traversal",
        "absolute",
        "slash",
        "dotdot",
        "upper",
        "dot",
        "empty",
        "long",
        "double-hyphen",
        "nul",
    ],
)
def test_bad_ids_are_refused(bad_id: str, tmp_path: Path) -> None:
    with pytest.raises(authoring.PathRefused):
        authoring.safe_path(tmp_path, bad_id, "security")
    with pytest.raises(authoring.PathRefused):
        authoring.safe_path(tmp_path, bad_id)


def test_traversal_id_refused_in_the_page(library: Path) -> None:
    at = start()
    at.text_input(key="author_new_id").input("../../outside")
    run(at)
    at.button(key="author_create").click()
    run(at)
    assert at.error and "not a valid id" in at.error[0].value
    assert at.session_state["author_doc"] is None

    # The same id typed into the YAML is a schema error; nothing can be written with it.
    open_scenario(at)
    text = at.text_area(key="author_yaml").value.replace(
        "id: http-client-choice", "id: ../../outside"
    )
    edit(at, "author_yaml", text)
    assert 'data-code="E002"' in html(at)
    assert at.button(key="author_save").disabled
    at.button(key="author_save_draft").click()  # a draft falls back to the opened name
    run(at)
    assert (library.parent / "data" / "drafts" / "http-client-choice.yaml").is_file()
    assert not list(library.parent.parent.glob("outside*"))
    assert not list(library.parent.glob("outside*"))


def test_symlinks_leading_out_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "scenarios"
    outside = tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    (root / "security").symlink_to(outside, target_is_directory=True)
    with pytest.raises(authoring.PathRefused, match="symbolic link"):
        authoring.safe_path(root, "x", "security")
    (root / "concurrency").mkdir()
    (root / "concurrency" / "y.yaml").symlink_to(outside / "y.yaml")
    with pytest.raises(authoring.PathRefused, match="symbolic link"):
        authoring.safe_path(root, "y", "concurrency")
    with pytest.raises(authoring.PathRefused, match="unknown category"):
        authoring.safe_path(root, "x", "../elsewhere")


def test_write_is_atomic_and_never_clobbers(tmp_path: Path) -> None:
    target = tmp_path / "security" / "x.yaml"
    authoring.write_atomic(target, "a: 1", replace=False)
    assert target.read_text() == "a: 1\n"
    with pytest.raises(FileExistsError):
        authoring.write_atomic(target, "a: 2", replace=False)
    assert target.read_text() == "a: 1\n"
    authoring.write_atomic(target, "a: 3\r\n", replace=True)
    assert target.read_text() == "a: 3\n"
    assert [p.name for p in target.parent.iterdir()] == ["x.yaml"]


def test_failed_save_keeps_the_editor_text(library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    at = open_scenario(start())
    edited = at.text_area(key="author_yaml").value.replace("version: 1", "version: 5")
    edit(at, "author_yaml", edited)
    monkeypatch.setattr(authoring, "write_atomic", disk_full)
    at.button(key="author_save").click()
    run(at)
    assert at.error and "No space left on device" in at.error[0].value
    assert at.text_area(key="author_yaml").value == edited
    assert "version: 1" in (library / "library-choice" / "http-client-choice.yaml").read_text()


# --------------------------------------------------------------------------- robustness


def test_catastrophic_regex_does_not_hang(library: Path) -> None:
    fixture = (REPO / "tests" / "fixtures" / "malformed" / "catastrophic-regex.yaml").read_text()
    at = open_scenario(start())
    edit(at, "author_yaml", fixture)  # default AppTest timeout: 3 s for lint + sample verdicts
    assert 'data-code="E011"' in html(at)
    show(at, "Check playground")
    edit(at, "author_code", "import httpx\ndef f():\n" + " " * 40 + "return 1\n")
    assert "timed out" in texts(at)


def test_samples_one_click_away_and_disagreement_flagged(library: Path) -> None:
    at = open_scenario(start())
    original = at.text_area(key="author_yaml").value
    item = '- "import httpx\\nhttpx.get(url)"'
    indent = original.splitlines()[line_of(original, item) - 1].split("-")[0]
    # A second "compliant" sample that imports requests: its label is wrong.
    text = original.replace(item, f'{item}\n{indent}- "import requests\\nhttpx.get(url)"')
    edit(at, "author_yaml", text)
    assert 'data-code="E008"' in html(at)
    show(at, "Check playground")
    table = at.dataframe[0].value
    assert "✗ disagrees" in list(table["verdict"])
    assert "disagree with their label" in texts(at)

    picker = at.selectbox(key="author_sample")
    assert any("compliant #2 — expected: passes every check" in o for o in picker.options)
    picker.select("httpx-not-requests:compliant:2")
    run(at)
    assert at.session_state["author_code"] == "import requests\nhttpx.get(url)"
    assert "the checks disagree" in texts(at)

    at.selectbox(key="author_sample").select("httpx-not-requests:violating:1")
    run(at)
    assert "the checks agree" in texts(at)


def test_prompts_show_all_three_arms(library: Path) -> None:
    at = show(open_scenario(start()), "Prompts")
    bodies = [c.value for c in at.code]
    assert len(bodies) == 6  # system + user for cold, mandated, incentivized
    assert any("Project memory" in b and "httpx-not-requests" in b for b in bodies)
    assert any("must follow" in b for b in bodies)


def test_check_kinds_listed_from_the_registry(library: Path) -> None:
    at = show(start(), "Check kinds")
    reference = texts(at)
    for name in registry():
        assert f"`kind: {name}`" in reference
    assert "`timeout_s`" in reference and "`where`" in reference


def test_library_table_status_and_filter(library: Path) -> None:
    (library / "security").mkdir()
    (library / "security" / "broken.yaml").write_text("id: broken\nversion: [\n")
    at = start()
    table = at.dataframe[0].value
    status = dict(zip(table["id"], table["lint"], strict=True))
    # a team's own scenario without superseded notes: one E027 warning per constraint
    # (README: Memory realism); nothing else to say about it
    assert status["http-client-choice"] == "⚠ 2 warnings"
    assert status["broken"].startswith("✗ 1 error")
    at.session_state["author_filter"] = ["security"]
    run(at)
    assert list(at.dataframe[0].value["id"]) == ["broken"]
    assert at.selectbox(key="author_pick").options == ["security / broken"]
