"""What every tab of the Results page shares: the page's CSS and the chart frame (its
tables are drawn by :mod:`studio.components.tables`)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from studio.components.text import plain

CELL_CACHE: dict[str, Any] = {"max_entries": 64, "ttl": 3600, "show_spinner": False}
PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
CSS = """<style>
.cvb-badges{display:flex;flex-wrap:wrap;gap:6px;margin:2px 0 6px;font-family:system-ui,sans-serif}
.cvb-badge{font-size:12px;border-radius:12px;padding:2px 10px;border:1px solid;max-width:100%;
  overflow-wrap:anywhere}
.cvb-badge.ok{color:#1a7f37;background:#dafbe1;border-color:#aceebb}
.cvb-badge.bad{color:#cf222e;background:#ffebe9;border-color:#ffcecb}
.cvb-badge.err{color:#9a6700;background:#fff8c5;border-color:#eac54f}
.cvb-badge.out{color:#57606a;background:#f6f8fa;border-color:#d0d7de}
.cvb-why{font-family:system-ui,sans-serif;font-size:12px;color:#57606a;margin:0 0 6px;padding:0;
  list-style:none}
.cvb-why li{margin:2px 0} .cvb-why code{font-size:11.5px;color:#cf222e;background:#fff5f5;
  border-radius:3px;padding:0 4px}
.cvb-pub{display:inline-block;font-size:11px;font-weight:700;letter-spacing:.05em;color:#fff;
  background:#57606a;border-radius:10px;padding:1px 9px;margin-right:6px;vertical-align:middle}
.cvb-arm{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.cvb-code{font-size:12px !important}
</style>"""


def downloaded(file_name: str) -> None:
    """Say that the export went to the browser (a download button shows nothing else)."""
    st.toast(
        f"{plain(file_name)} was built and handed to your browser: see its downloads.",
        icon=":material/download_done:",
    )


def chart(fig: Any, key: str) -> None:
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, width="stretch")
