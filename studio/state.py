"""Session-wide studio state: where the scenarios and the store are, cached engine access.

Pages call these helpers instead of reading the environment themselves, so a
test can point the whole studio at a temporary folder and database with two
environment variables: ``CVB_SCENARIOS`` and ``CVB_DATABASE_URL``.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st
from sqlalchemy.engine import Engine, make_url

from cvb_engine import database_url
from studio import cache

# (file in app_pages/, title, icon, url path)
PAGES: list[tuple[str, str, str, str]] = [
    ("author.py", "Author", ":material/edit_note:", "author"),
    ("run.py", "Run", ":material/play_circle:", "run"),
    ("results.py", "Results", ":material/insights:", "results"),
]


def scenarios_root() -> Path:
    return Path(os.environ.get("CVB_SCENARIOS", "scenarios")).resolve()


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
