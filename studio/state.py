"""Session-wide studio state: where the scenarios and the store are, cached engine access.

Pages call these helpers instead of reading the environment themselves, so a
test can point the whole studio at a temporary folder and database with two
environment variables: ``CVB_SCENARIOS`` and ``CVB_DATABASE_URL``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from sqlalchemy.engine import Engine, make_url

from cvb_engine import author_root as library_author_root
from cvb_engine import database_url, library_root
from studio import cache

# (file in app_pages/, title, icon, url path)
PAGES: list[tuple[str, str, str, str]] = [
    ("author.py", "Author", ":material/edit_note:", "author"),
    ("run.py", "Run", ":material/play_circle:", "run"),
    ("results.py", "Results", ":material/insights:", "results"),
]


def scenarios_root() -> Path:
    """The library the Run and Results pages read: ``$CVB_SCENARIOS``, else the shipped one."""
    return library_root().resolve()


def author_root() -> Path:
    """Where the Author page lists and saves scenarios: ``$CVB_SCENARIOS``, a checkout's
    own ``scenarios/``, else the user folder (created on the first save), never the
    installed package (README, "Scenario folders")."""
    return library_author_root().resolve()


def db_url() -> str:
    return database_url()


def store_label() -> str:
    return make_url(db_url()).render_as_string(hide_password=True)


def engine() -> Engine:
    """The store's engine, shared by every session of this studio process."""
    return cache.store_engine(db_url())


def init() -> None:
    """Once per session: defaults the pages rely on."""
    st.session_state.setdefault("studio_ready", True)
