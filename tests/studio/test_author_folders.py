"""Drafts and saves of the Author page land in the user folder when the library is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvb_engine import authoring, library


def test_drafts_of_an_installed_library_go_to_the_user_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages" / "cvb_engine" / "scenarios"
    site.mkdir(parents=True)
    monkeypatch.setattr(library, "shipped_root", lambda: site)
    monkeypatch.delenv(authoring.DRAFTS_ENV, raising=False)
    monkeypatch.setenv("CVB_HOME", str(tmp_path / "home"))
    assert authoring.drafts_root(site) == (tmp_path / "home" / "drafts").resolve()
    team = tmp_path / "team" / "scenarios"
    assert authoring.drafts_root(team) == (tmp_path / "team" / "data" / "drafts").resolve()


def test_first_save_creates_the_user_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "home" / "scenarios"
    shipped = library.shipped_root()
    text = next((shipped / "security").glob("*.yaml")).read_text(encoding="utf-8")
    outcome = authoring.save_to_library(text, root, [], {})
    assert outcome.status == "saved", outcome.message
    assert outcome.path is not None and outcome.path.is_file()
    assert outcome.path.parent == root / "security"


def test_author_page_of_an_installed_library_saves_to_the_user_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    app = Path(__file__).resolve().parents[2] / "studio" / "streamlit_app.py"
    site = tmp_path / "site-packages" / "cvb_engine" / "scenarios"
    site.mkdir(parents=True)
    before = sorted(p.name for p in site.rglob("*"))
    monkeypatch.setattr(library, "shipped_root", lambda: site)
    for name in ("CVB_SCENARIOS", authoring.DRAFTS_ENV):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("CVB_HOME", str(home))
    monkeypatch.setenv("CVB_DATABASE_URL", f"sqlite:///{tmp_path / 'cvb.db'}")
    at = AppTest.from_file(str(app), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not home.exists()  # nothing is created before the first save
    at.text_input(key="author_new_id").input("toml-settings-loader")
    at.selectbox(key="author_new_category").select("encoding-io")
    at.selectbox(key="author_new_template").select("Regex checks")
    at.run()
    at.button(key="author_create").click()
    at.run()
    at.button(key="author_save").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert (home / "scenarios" / "encoding-io" / "toml-settings-loader.yaml").is_file()
    assert sorted(p.name for p in site.rglob("*")) == before  # the package is untouched
