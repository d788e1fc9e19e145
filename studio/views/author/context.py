"""The Author page's state: the library, the open scenario and its lint, shared by every
tab; and the actions its buttons run.

Session keys start with ``author_``; the editor and playground texts persist across
page switches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from cvb_engine import TEMPLATES, LoadedScenario
from cvb_engine import authoring as au
from studio import cache, state
from studio.components.text import plain

LIBRARY, EDITOR, PLAYGROUND, PROMPTS, KINDS = (
    "Library",
    "Editor",
    "Check playground",
    "Prompts",
    "Check kinds",
)
# Code is edited in a monospace font without soft wrapping: indentation is syntax in
# both YAML and Python, and a wrapped line would look like an indented one.
MONOSPACE_CSS = """<style>
.st-key-author_yaml textarea, .st-key-author_code textarea {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
  line-height: 1.45; white-space: pre; overflow-wrap: normal; overflow-x: auto; tab-size: 4; }
</style>"""


ss = st.session_state


@dataclass(frozen=True)
class AuthorContext:
    """What one rerun of the page knows: the library and drafts, the open scenario's text
    and its lint (None while no scenario is open)."""

    root: Path
    drafts: Path
    entries: list[au.LibraryEntry]
    library: list[LoadedScenario]
    doc: dict[str, Any] | None
    text: str
    lint: au.EditorLint | None

    def rel(self, path: Path | str) -> str:
        return au.relative_label(Path(path), self.root, self.drafts)

    def lint_fallback(self, doc: dict[str, Any]) -> Path:
        """The file name lint uses until the text's own id and category can be read."""
        if doc.get("path") and doc["where"] == "library":
            return Path(doc["path"])
        return self.root / f"{doc['name']}.yaml"


def load() -> AuthorContext:
    ss.setdefault("author_doc", None)  # {"name", "path", "where", "baseline"} of the open scenario
    ss.setdefault("author_owned", {})  # path -> sha256 of what this session opened or wrote there
    root = state.author_root()
    drafts = au.drafts_root(root)
    entries, library = cache.library_view(root, drafts)
    doc = ss.author_doc
    text = ss.get("author_yaml") or ""
    ctx = AuthorContext(root, drafts, entries, library, doc, text, None)
    if doc is None:
        return ctx
    lint = cache.lint(text, str(root), str(ctx.lint_fallback(doc)), au.library_stamps(root))
    return AuthorContext(root, drafts, entries, library, doc, text, lint)


def md(value: str) -> str:
    """``value`` as literal Markdown text: check reasons and parameters hold regexes and code,
    whose ``*``, ``_``, ``$`` or brackets would otherwise turn into formatting or LaTeX."""
    return plain(value, limit=4000, multiline=True)


# --------------------------------------------------------------------------- actions


def open_entry(ctx: AuthorContext, key: str) -> None:
    entry = next((e for e in cache.library_view(ctx.root, ctx.drafts)[0] if e.key == key), None)
    if entry is None:
        ss.author_flash = ("refused", "That file is gone; the library was refreshed.")
        return
    path = Path(entry.path)
    text = au.read_text(path)
    ss.author_doc = {"name": entry.id, "path": str(path), "where": entry.where, "baseline": text}
    ss.author_owned[str(path)] = au.file_sha256(path)
    start_editing(text)


def pick_row(rows: list[au.LibraryEntry]) -> None:
    """A click on a table row chooses that scenario in the Open box."""
    selected = ss.author_table.selection.rows
    if selected and selected[0] < len(rows):
        ss.author_pick = rows[selected[0]].key


def create_from_template(ctx: AuthorContext) -> None:
    new_id = (ss.get("author_new_id") or "").strip()
    problem = au.id_problem(new_id)
    taken = next((e for e in ctx.entries if e.where == "library" and e.id == new_id), None)
    if problem is None and taken is not None:
        problem = (
            f"a scenario with id {new_id!r} exists ({ctx.rel(taken.path)}); "
            "open it, or choose another id"
        )
    if problem:
        ss.author_new_error = problem
        return
    template = TEMPLATES[ss.author_new_template]
    ss.author_doc = {"name": new_id, "path": None, "where": "new", "baseline": ""}
    start_editing(template.render(new_id, ss.author_new_category))


def start_editing(text: str) -> None:
    ss.author_yaml = text
    ss.author_code = ""
    ss.pop("author_loaded_sample", None)
    ss.pop("author_flash", None)
    ss.pop("author_new_error", None)
    ss.author_view = EDITOR


def save(ctx: AuthorContext, kind: str) -> None:
    doc = ss.author_doc
    text = ss.get("author_yaml") or ""
    owned = ss.author_owned
    if kind == "library":
        outcome = au.save_to_library(
            text,
            ctx.root,
            cache.library_view(ctx.root, ctx.drafts)[1],
            owned,
            overwrite=bool(ss.get("author_overwrite")),
            fallback=ctx.lint_fallback(doc),
        )
    else:
        outcome = au.save_draft(
            text, ctx.drafts, doc["name"], owned, overwrite=bool(ss.get("author_overwrite_draft"))
        )
    message = outcome.message
    if outcome.status == "saved" and outcome.path is not None and outcome.sha256:
        previous = doc.get("path")
        owned[str(outcome.path)] = outcome.sha256
        promoted = kind == "library" and doc["where"] == "draft" and previous
        if promoted and au.discard_draft(Path(previous), ctx.drafts, owned):
            message += f" The draft {ctx.rel(previous)} was removed."
        ss.author_doc = {
            "name": outcome.path.stem,
            "path": str(outcome.path),
            "where": "library" if kind == "library" else "draft",
            "baseline": text,
        }
        message = message.replace(str(outcome.path), ctx.rel(outcome.path))
        ss.author_overwrite = False
        ss.author_overwrite_draft = False
    ss.author_flash = (outcome.status, message)
