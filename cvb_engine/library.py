"""Where the scenarios are: the shipped library (package data), a team's own folder, and
the user folder the studio's Author page writes to.

* The shipped library (the 35 CVB scenarios, the IVR pack under ``ivr/`` and the
  memory pool ``memory/pool.yaml``) is the package ``cvb_engine.scenarios``, read
  through :mod:`importlib.resources`. In a checkout ``cvb_engine/scenarios`` is a link
  to the top-level ``scenarios/`` folder, so the wheel, an editable install and a
  ``PYTHONPATH`` checkout all read the same files (see the README, "Scenario folders").
* A team's own library is a folder named with ``--scenarios DIR`` or configured once
  with ``$CVB_SCENARIOS``; either wins over the shipped one.
* The studio's Author page never writes into an installed package: outside a checkout
  it writes to ``$CVB_HOME/scenarios`` (default ``$XDG_DATA_HOME/cvb-studio`` or
  ``~/.local/share/cvb-studio``), created on the first save.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

__all__ = [
    "SCENARIOS_ENV",
    "SHIPPED_PACKAGE",
    "author_root",
    "is_checkout",
    "is_installed_library",
    "scenarios_root",
    "shipped_ivr",
    "shipped_pool",
    "shipped_root",
    "user_home",
]

#: The package that holds the shipped library.
SHIPPED_PACKAGE = "cvb_engine.scenarios"
#: The variable naming a team's own scenario folder (the default of every ``--scenarios``).
SCENARIOS_ENV = "CVB_SCENARIOS"
#: The variable naming the user folder (Author page saves and drafts).
HOME_ENV = "CVB_HOME"


class LibraryMissing(RuntimeError):
    """The shipped library cannot be found: a broken install (the message says so)."""


def shipped_root() -> Path:
    """The folder of the shipped library.

    Raises:
        LibraryMissing: the package data is absent or not on a file system (a zipped
            install), which no command can work from.
    """
    try:
        found = importlib.resources.files(SHIPPED_PACKAGE)
    except ModuleNotFoundError:
        # A checkout whose link was not made (git on a file system without symlinks):
        # the folder beside the package is the same library.
        found = None
    if isinstance(found, Path) and found.is_dir():
        return found
    beside = Path(__file__).resolve().parent.parent / "scenarios"
    if (beside / "__init__.py").is_file():
        return beside
    raise LibraryMissing(
        f"the shipped scenario library ({SHIPPED_PACKAGE}) is not installed as files; "
        "reinstall cvb-studio from its wheel, or name a folder with --scenarios"
    )


def shipped_ivr() -> Path:
    """The shipped IVR pack (``ivr/`` of the shipped library)."""
    return shipped_root() / "ivr"


def shipped_pool() -> Path:
    """The shipped memory pool (``memory/pool.yaml`` of the shipped library)."""
    return shipped_root() / "memory" / "pool.yaml"


def scenarios_root(given: str | Path | None = None) -> Path:
    """The scenario library a command reads: ``given`` (``--scenarios``), else
    ``$CVB_SCENARIOS``, else the shipped library."""
    if given is not None and str(given) != "":
        return Path(given)
    configured = os.environ.get(SCENARIOS_ENV)
    if configured:
        return Path(configured)
    return shipped_root()


def is_checkout(root: Path) -> bool:
    """Whether ``root`` is the ``scenarios/`` folder of a source checkout (beside a
    ``pyproject.toml``) rather than installed package data."""
    resolved = root.resolve()
    return (resolved.parent / "pyproject.toml").is_file()


def user_home() -> Path:
    """The user folder: ``$CVB_HOME``, else ``$XDG_DATA_HOME/cvb-studio``, else
    ``~/.local/share/cvb-studio``. Not created here: the first save creates it."""
    configured = os.environ.get(HOME_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "cvb-studio"


def author_root() -> Path:
    """Where the Author page writes scenarios: ``$CVB_SCENARIOS`` when configured; the
    checkout's own ``scenarios/`` when running from a source checkout (authoring the
    shipped set); else ``scenarios/`` under :func:`user_home`, never the installed package."""
    configured = os.environ.get(SCENARIOS_ENV)
    if configured:
        return Path(configured)
    shipped = shipped_root()
    if is_checkout(shipped):
        return shipped
    return user_home() / "scenarios"


def is_installed_library(root: Path) -> bool:
    """Whether ``root`` lies in the shipped library of an installed package (not a
    checkout): a folder nothing may write into."""
    shipped = shipped_root().resolve()
    resolved = root.resolve()
    inside = resolved == shipped or shipped in resolved.parents
    return inside and not is_checkout(shipped)
