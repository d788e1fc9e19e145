"""CVB Studio: author scenarios, run them against endpoints, read the results.

Started by ``cvb studio``; pages live in ``studio/app_pages/``. Shared state
(the database engine, the scenario folder) is set up here once per session and
read by the pages through :mod:`studio.state`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# `streamlit run` puts this file's folder on sys.path, not the repository's:
# make `studio` importable as a package when running from a checkout.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from studio import state  # noqa: E402

st.set_page_config(page_title="CVB Studio", page_icon="🧭", layout="wide")
state.init()

PAGES = Path(__file__).resolve().parent / "app_pages"
pages = [
    st.Page(PAGES / name, title=title, icon=icon, url_path=url)
    for name, title, icon, url in state.PAGES
    if (PAGES / name).exists()
]


def _home() -> None:
    st.switch_page(pages[0])


# Streamlit serves the default page at "/" only, so a link to its url_path
# would open "Page not found": the default is a hidden page that forwards to
# the first one, and /author, /run and /results all open their page.
home = st.Page(_home, title="CVB Studio", url_path="home", default=True, visibility="hidden")
navigation = st.navigation([home, *pages], position="sidebar")
with st.sidebar:
    st.caption(f"Store: `{state.store_label()}`")
    st.caption(f"Scenarios: `{state.scenarios_root()}`")
navigation.run()
