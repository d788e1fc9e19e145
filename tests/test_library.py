"""The shipped library as package data, and which folder each reader and writer uses."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from cvb_engine import library
from cvb_engine.scenario import CVB_CATEGORIES, load_library

REPO = Path(__file__).resolve().parent.parent


def test_shipped_library_is_the_package_data_read_through_importlib_resources() -> None:
    found = importlib.resources.files(library.SHIPPED_PACKAGE)
    assert isinstance(found, Path)
    # in a checkout the package is a link to the top-level folder: one set of files
    assert found.resolve() == (REPO / "scenarios").resolve()
    assert library.shipped_root() == found


def test_shipped_library_holds_the_benchmark() -> None:
    loaded = load_library(library.shipped_root())
    cvb = [s for s in loaded.values() if s.scenario.category in CVB_CATEGORIES]
    assert len(cvb) == 35
    per = {c: sum(s.scenario.category == c for s in cvb) for c in CVB_CATEGORIES}
    assert set(per.values()) == {5}
    ivr = [s for s in loaded.values() if s.scenario.category == "ivr"]
    assert ivr and {p.name for p in library.shipped_ivr().glob("*.yaml")} == {
        f"{s.scenario.id}.yaml" for s in ivr
    }
    assert library.shipped_pool().is_file()


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [
        pytest.param("mine", "team", "mine", id="flag-wins"),
        pytest.param(None, "team", "team", id="configured-folder"),
        pytest.param("", "team", "team", id="empty-flag-is-no-flag"),
        pytest.param(None, None, "<shipped>", id="shipped-default"),
    ],
)
def test_scenarios_root_precedence(
    given: str | None, env: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(library.SCENARIOS_ENV, raising=False)
    else:
        monkeypatch.setenv(library.SCENARIOS_ENV, env)
    want = library.shipped_root() if expected == "<shipped>" else Path(expected)
    assert library.scenarios_root(given) == want


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"CVB_HOME": "/h/cvb", "XDG_DATA_HOME": "/x"}, "/h/cvb", id="cvb-home"),
        pytest.param({"XDG_DATA_HOME": "/x"}, "/x/cvb-studio", id="xdg"),
        pytest.param({"HOME": "/home/u"}, "/home/u/.local/share/cvb-studio", id="home"),
    ],
)
def test_user_home(env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CVB_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert library.user_home() == Path(expected)


def _installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shipped library as an installed wheel lays it out: no pyproject.toml beside it."""
    site = tmp_path / "site-packages" / "cvb_engine" / "scenarios"
    (site / "security").mkdir(parents=True)
    monkeypatch.setattr(library, "shipped_root", lambda: site)
    return site


def test_author_page_never_writes_into_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _installed(tmp_path, monkeypatch)
    monkeypatch.delenv(library.SCENARIOS_ENV, raising=False)
    monkeypatch.setenv("CVB_HOME", str(tmp_path / "home"))
    assert library.author_root() == tmp_path / "home" / "scenarios"
    assert not (tmp_path / "home").exists()  # created on the first save, not before
    assert library.is_installed_library(site / "security")
    assert not library.is_installed_library(tmp_path / "home" / "scenarios")


def test_author_page_edits_a_checkout_or_a_configured_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(library.SCENARIOS_ENV, raising=False)
    assert library.author_root() == library.shipped_root()  # this checkout
    assert not library.is_installed_library(library.shipped_root())
    monkeypatch.setenv(library.SCENARIOS_ENV, str(tmp_path / "team"))
    assert library.author_root() == tmp_path / "team"
