"""Author: browse the scenario library, edit a scenario with live lint, try its checks, save it.

The page only lays things out; what it shows comes from :mod:`studio.authoring`
(library, lint, samples, saving) and the engine. Session keys start with
``author_``; the editor and playground texts persist across page switches.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import streamlit as st

from cvb_engine import CATEGORIES, CVB_CATEGORIES, PROMPT_VERSION, Scored
from cvb_engine.scenario import MAX_FILE_BYTES
from studio import authoring as au
from studio import state
from studio.components.code_view import code_html
from studio.components.findings_view import findings_html
from studio.components.text import plain
from studio.components.verdict_marks import marks_for
from studio.scenario_templates import TEMPLATES

LIBRARY, EDITOR, PLAYGROUND, PROMPTS, KINDS = (
    "Library",
    "Editor",
    "Check playground",
    "Prompts",
    "Check kinds",
)
MAX_CODE_CHARS = 100_000
ARM_NOTES = {
    "cold": "The task alone: what a model does by default.",
    "mandated": "The task, then the constraints framed as explicit orders.",
    "incentivized": "The constraints as past decisions in project memory (never as orders), "
    "then the task. The gap between mandated and incentivized is the headline metric.",
}
PASS = ":green[:material/check_circle:]"
FAIL = ":red[:material/cancel:]"
# Code is edited in a monospace font without soft wrapping: indentation is syntax in
# both YAML and Python, and a wrapped line would look like an indented one.
MONOSPACE_CSS = """<style>
.st-key-author_yaml textarea, .st-key-author_code textarea {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
  line-height: 1.45; white-space: pre; overflow-wrap: normal; overflow-x: auto; tab-size: 4; }
</style>"""

ss = st.session_state
ss.setdefault("author_doc", None)  # {"name", "path", "where", "baseline"} of the open scenario
ss.setdefault("author_owned", {})  # path -> sha256 of what this session opened or wrote there

root = state.scenarios_root()
drafts = au.drafts_root(root)
entries, library = au.library_view(root, drafts)


def rel(path: Path | str) -> str:
    return au.relative_label(Path(path), root, drafts)


# --------------------------------------------------------------------------- actions


def open_entry(key: str) -> None:
    entry = next((e for e in au.library_view(root, drafts)[0] if e.key == key), None)
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


def create_from_template() -> None:
    new_id = (ss.get("author_new_id") or "").strip()
    problem = au.id_problem(new_id)
    taken = next((e for e in entries if e.where == "library" and e.id == new_id), None)
    if problem is None and taken is not None:
        problem = (
            f"a scenario with id {new_id!r} exists ({rel(taken.path)}); "
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


def save(kind: str) -> None:
    doc = ss.author_doc
    text = ss.get("author_yaml") or ""
    owned = ss.author_owned
    if kind == "library":
        outcome = au.save_to_library(
            text,
            root,
            au.library_view(root, drafts)[1],
            owned,
            overwrite=bool(ss.get("author_overwrite")),
            fallback=lint_fallback(doc),
        )
    else:
        outcome = au.save_draft(
            text, drafts, doc["name"], owned, overwrite=bool(ss.get("author_overwrite_draft"))
        )
    message = outcome.message
    if outcome.status == "saved" and outcome.path is not None and outcome.sha256:
        previous = doc.get("path")
        owned[str(outcome.path)] = outcome.sha256
        promoted = kind == "library" and doc["where"] == "draft" and previous
        if promoted and au.discard_draft(Path(previous), drafts, owned):
            message += f" The draft {rel(previous)} was removed."
        ss.author_doc = {
            "name": outcome.path.stem,
            "path": str(outcome.path),
            "where": "library" if kind == "library" else "draft",
            "baseline": text,
        }
        message = message.replace(str(outcome.path), rel(outcome.path))
        ss.author_overwrite = False
        ss.author_overwrite_draft = False
    ss.author_flash = (outcome.status, message)


def load_sample(verdicts: list[au.SampleVerdict]) -> None:
    key = ss.get("author_sample")
    verdict = next((v for v in verdicts if v.key == key), None)
    if verdict is not None:
        ss.author_code = verdict.code
        ss.author_loaded_sample = verdict
    ss.author_sample = None


def lint_fallback(doc: dict[str, Any]) -> Path:
    """The file name lint uses until the text's own id and category can be read."""
    if doc.get("path") and doc["where"] == "library":
        return Path(doc["path"])
    return root / f"{doc['name']}.yaml"


def fields_table(fields: tuple[au.FieldDoc, ...]) -> str:
    """A Markdown table (it wraps long descriptions, unlike a data grid)."""

    def cell(value: str) -> str:
        return md(value).replace("\n", " ")

    rows = [
        f"| `{f.name}` | {cell(f.type)} | {cell(f.default)} | {cell(f.description)} |"
        for f in fields
    ]
    return "\n".join(["| parameter | type | default | meaning |", "|---|---|---|---|", *rows])


def show_verdicts(scored: Scored, summary: dict[str, list[tuple[str, str]]]) -> None:
    """Overall verdict, then one card per constraint listing each check's verdict and reason."""
    failed = [c for c in scored.constraints if not c.honored]
    n = len(scored.constraints)
    if failed:
        st.markdown(f"#### {FAIL} Violates {len(failed)} of {n} constraint(s)")
    else:
        st.markdown(f"#### {PASS} Honors all {n} constraint(s)")
    for verdict in scored.constraints:
        with st.container(border=True):
            icon = PASS if verdict.honored else FAIL
            state_word = ":green[honored]" if verdict.honored else ":red[violated]"
            st.markdown(f"{icon} **{verdict.constraint_id}** — {state_word}")
            params = dict(summary.get(verdict.constraint_id, []))
            for check in verdict.checks:
                label = f"{verdict.constraint_id}/{check.check_id}"
                mark = ":green[pass]" if check.result.passed else ":red[**fail**]"
                st.markdown(f"{mark} `{label}` — {md(check.result.reason)}")
                st.caption(md(params.get(label, check.kind)))
    if scored.stated_detail is not None:
        ok = ":green[pass]" if scored.stated_passed else ":red[**fail**]"
        st.markdown(f"**Stated tests:** {ok} — {md(scored.stated_detail.reason)}")


def show_sample_agreement(scored: Scored, code: str) -> None:
    """When the code is a loaded sample, whether its constraint's verdict matches its label."""
    loaded = ss.get("author_loaded_sample")
    if loaded is None or loaded.code != code:
        return
    verdict = next((c for c in scored.constraints if c.constraint_id == loaded.constraint_id), None)
    note = (
        f"Sample **{loaded.constraint_id} · {loaded.label} #{loaded.index}** — "
        f"expected: {loaded.expected_text}; "
    )
    if verdict is not None and verdict.honored == loaded.expected_honored:
        st.success(note + "the checks agree.")
    else:
        st.error(note + "**the checks disagree** — a check or the sample needs fixing.")


def md(value: str) -> str:
    """``value`` as literal Markdown text: check reasons and parameters hold regexes and code,
    whose ``*``, ``_``, ``$`` or brackets would otherwise turn into formatting or LaTeX."""
    return plain(value, limit=4000, multiline=True)


def sample_label(v: au.SampleVerdict) -> str:
    mark = {None: "…", True: "✓", False: "✗"}[v.agrees]
    return f"{mark} {v.constraint_id} · {v.label} #{v.index} — expected: {v.expected_text}"


# --------------------------------------------------------------------------- page

st.html(MONOSPACE_CSS)
st.title("Author")
st.caption(
    "Write a benchmark scenario, lint it as you type, try its checks on code, and save it into "
    f"the library at `{root}`."
)

doc = ss.author_doc
text = ss.get("author_yaml") or ""
lint = None
if doc is not None:
    lint = au.cached_lint(text, str(root), str(lint_fallback(doc)), au.library_stamps(root))

library_tab, editor_tab, playground_tab, prompts_tab, kinds_tab = st.tabs(
    [LIBRARY, EDITOR, PLAYGROUND, PROMPTS, KINDS],
    key="author_view",
    on_change="rerun",
    default=LIBRARY,
)

if library_tab.open:
    with library_tab:
        present = sorted({e.category for e in entries if e.category in CATEGORIES})
        chosen = st.pills(
            "Filter by category",
            present,
            selection_mode="multi",
            key="author_filter",
            help="No category selected shows them all.",
        )
        shown = [e for e in entries if not chosen or e.category in chosen]
        counts = Counter(e.category for e in entries if e.where == "library")
        st.caption(
            " · ".join(
                f"{c} **{counts.get(c, 0)}**" + ("" if counts.get(c, 0) == 5 else " ⚠")
                for c in CVB_CATEGORIES
            )
            + " — the CVB set has 5 scenarios per category. "
            "Tick a row to choose it, then open it below."
        )
        if shown:
            st.dataframe(
                [
                    {
                        "id": e.id,
                        "category": e.category,
                        "title": e.title,
                        "constraints": e.constraints,
                        "lint": e.status,
                        "where": "draft" if e.where == "draft" else "library",
                    }
                    for e in shown
                ],
                hide_index=True,
                key="author_table",
                on_select=lambda: pick_row(shown),
                selection_mode="single-row",
                column_config={
                    "id": st.column_config.TextColumn(width="medium"),
                    "title": st.column_config.TextColumn(width="large"),
                    "constraints": st.column_config.NumberColumn(width="small"),
                },
            )
        else:
            st.info(f"No scenario files under `{root}` yet. Start a new one on the right.")

        dirty = doc is not None and text != doc["baseline"]
        if dirty:
            st.warning(
                f"**{doc['name']}** has unsaved changes. Opening or creating another scenario "
                "discards them; save them (or save a draft) in the Editor tab first."
            )
        open_col, new_col = st.columns(2, gap="large")
        with open_col, st.container(border=True):
            st.markdown("**Open a scenario**")
            labels = {
                e.key: f"{e.category} / {e.id}" + ("  (draft)" if e.where == "draft" else "")
                for e in shown
            }
            picked = st.selectbox(
                "Scenario",
                list(labels),
                index=None,
                format_func=labels.get,
                placeholder="Choose or type to search…",
                key="author_pick",
            )
            st.button(
                "Discard changes and open" if dirty else "Open in editor",
                key="author_open",
                type="primary",
                disabled=picked is None,
                on_click=open_entry,
                args=(picked,),
            )
            st.caption(
                "To start from an existing scenario, open it and change its `id`: saving then "
                "writes a new file and leaves the original alone."
            )
        with new_col, st.container(border=True):
            st.markdown("**Start a new scenario**")
            st.text_input(
                "id",
                key="author_new_id",
                placeholder="e.g. yaml-safe-load",
                help="Lowercase words joined by hyphens; it becomes the file name.",
            )
            # The templates are CVB scenarios; an IVR problem also needs stated tests, a
            # reference solution and exec checks, so it starts from an existing problem.
            st.selectbox(
                "Category",
                CVB_CATEGORIES,
                key="author_new_category",
                help="For an IVR problem, open an existing one from the ivr category and "
                "change its id.",
            )
            st.selectbox(
                "Template",
                list(TEMPLATES),
                key="author_new_template",
                format_func=lambda name: f"{name} — {TEMPLATES[name].summary}",
            )
            if ss.get("author_new_error"):
                st.error(ss.author_new_error)
            st.button(
                "Discard changes and create" if dirty else "Create from template",
                key="author_create",
                on_click=create_from_template,
            )

if editor_tab.open:
    with editor_tab:
        if doc is None or lint is None:
            st.info(
                "Nothing is open. Pick a scenario in the **Library** tab, or start a new one there."
            )
        else:
            where = {"library": "library file", "draft": "draft", "new": "new, not saved yet"}
            head, badges = st.columns([3, 2], vertical_alignment="bottom")
            with head:
                st.subheader(doc["name"], anchor=False)
                st.caption(
                    f"{where[doc['where']]}"
                    + (f" · `{rel(doc['path'])}`" if doc.get("path") else "")
                )
            with badges, st.container(horizontal=True, horizontal_alignment="right"):
                if lint.errors:
                    st.badge(f"{lint.errors} lint error{'s' * (lint.errors != 1)}", color="red")
                elif lint.warnings:
                    st.badge(f"lint clean · {lint.warnings} warning(s)", color="orange")
                else:
                    st.badge("lint clean", icon=":material/check:", color="green")
                if text != doc["baseline"]:
                    st.badge("unsaved changes", color="violet")

            edit_col, side_col = st.columns([3, 2], gap="medium")
            with edit_col:
                st.text_area(
                    "Scenario YAML",
                    key="author_yaml",
                    height=640,
                    max_chars=MAX_FILE_BYTES,
                    persist_state="session",
                    help="Lint runs when the editor loses focus or on Ctrl+Enter.",
                )
            with side_col:
                with st.container(border=True):
                    plan = au.plan_library_save(lint, ss.author_owned)
                    draft_plan = au.plan_draft_save(text, drafts, doc["name"], ss.author_owned)
                    st.markdown("**Save**")
                    if plan.target is not None:
                        st.caption(f"Library file: `{rel(plan.target)}`")
                    if draft_plan.target is not None:
                        st.caption(
                            f"Draft file: `{rel(draft_plan.target)}` (kept out of the library; "
                            "saved whatever lint says)"
                        )
                    if plan.blocked:
                        st.caption(f"🔒 Saving to the library is blocked: {plan.blocked}.")
                    if plan.needs_confirmation:
                        changed = str(plan.target) in ss.author_owned
                        st.warning(
                            f"`{rel(plan.target or '')}` already exists"
                            + (" and changed on disk since you opened it." if changed else ".")
                        )
                        st.checkbox("Overwrite the existing file", key="author_overwrite")
                    if draft_plan.needs_confirmation:
                        st.checkbox(
                            f"Overwrite the existing draft `{rel(draft_plan.target or '')}`",
                            key="author_overwrite_draft",
                        )
                    save_col, draft_col = st.columns(2)
                    save_col.button(
                        "Save to library",
                        key="author_save",
                        type="primary",
                        icon=":material/save:",
                        width="stretch",
                        disabled=bool(plan.blocked)
                        or (plan.needs_confirmation and not ss.get("author_overwrite")),
                        on_click=save,
                        args=("library",),
                    )
                    draft_col.button(
                        "Save draft",
                        key="author_save_draft",
                        icon=":material/draft:",
                        width="stretch",
                        disabled=bool(draft_plan.blocked)
                        or (draft_plan.needs_confirmation and not ss.get("author_overwrite_draft")),
                        on_click=save,
                        args=("draft",),
                        help=f"Writes the text as it is, lint errors included, to `{rel(drafts)}/`, "
                        "outside the linted library.",
                    )
                    flash = ss.pop("author_flash", None)
                    if flash:
                        status, message = flash
                        {"saved": st.success, "confirm": st.warning}.get(status, st.error)(message)
                with st.container(border=True):
                    st.markdown(
                        f"**Lint** — {lint.errors} error(s), {lint.warnings} warning(s)"
                        if lint.findings
                        else "**Lint**"
                    )
                    tall = len(lint.findings) > 5
                    with st.container(height=470 if tall else "content", border=False):
                        st.html(findings_html(lint.findings, text))

if playground_tab.open:
    with playground_tab:
        item = lint.item if lint is not None else None
        if doc is None or lint is None:
            st.info("Nothing is open. Pick a scenario in the **Library** tab first.")
        elif item is None:
            st.warning(
                "The YAML in the editor does not load yet, so its checks cannot run. "
                "Fix the errors shown in the **Editor** tab."
            )
        else:
            scenario = item.scenario
            path = str(item.path)
            st.caption(
                f"Runs every check of **{scenario.id}** — as it is in the editor, unsaved edits "
                "included — on the code below. Matching spans are highlighted and labelled "
                "`constraint-id/check-id`."
            )
            verdicts = au.cached_samples(text, path)
            st.selectbox(
                "Load one of the scenario's own samples",
                [v.key for v in verdicts],
                index=None,
                format_func=lambda key: sample_label(next(v for v in verdicts if v.key == key)),
                placeholder="Choose a sample (✓ agrees with its label, ✗ disagrees)…",
                key="author_sample",
                on_change=load_sample,
                args=(verdicts,),
            )
            code_col, verdict_col = st.columns([2, 3], gap="medium")
            with code_col:
                code = st.text_area(
                    "Code to check",
                    key="author_code",
                    height=340,
                    max_chars=MAX_CODE_CHARS,
                    persist_state="session",
                    placeholder="Paste or type Python code, as a model might answer…",
                    help="Checks run when the box loses focus or on Ctrl+Enter.",
                )
                code = code or ""
            scored = au.cached_score(text, path, code) if code.strip() else None
            with verdict_col:
                if scored is None:
                    st.markdown("#### Verdicts")
                    st.caption(
                        "Type or paste code on the left (or load a sample above): each constraint "
                        "and each of its checks shows pass or fail here, with the reason."
                    )
                else:
                    show_verdicts(scored, au.check_summary(scenario))
                    show_sample_agreement(scored, code)
            if scored is not None:
                st.markdown("**Highlighted** — each span a check matched, labelled by that check")
                st.html(code_html(code, marks_for(scored)))

            st.markdown("#### The scenario's samples")
            disagree = [v for v in verdicts if v.agrees is False]
            if disagree:
                st.error(
                    "These samples disagree with their label (lint reports them as E008): "
                    + ", ".join(f"**{v.constraint_id} · {v.label} #{v.index}**" for v in disagree)
                )
            elif verdicts:
                st.caption("Every sample agrees with its label.")
            st.dataframe(
                [
                    {
                        "constraint": v.constraint_id,
                        "sample": f"{v.label} #{v.index}",
                        "expected": v.expected_text,
                        "got": v.got_text,
                        "verdict": {None: "… not run", True: "✓ agrees", False: "✗ disagrees"}[
                            v.agrees
                        ],
                    }
                    for v in verdicts
                ],
                hide_index=True,
                key="author_samples_table",
            )

if prompts_tab.open:
    with prompts_tab:
        item = lint.item if lint is not None else None
        if item is None:
            st.info("Open a scenario whose YAML loads to see the prompts each arm sends.")
        else:
            st.caption(
                f"Exactly what each arm sends to the model (prompt version {PROMPT_VERSION}), "
                "built from the editor text, unsaved edits included."
            )
            arms = au.prompts(item.scenario)
            for arm_tab, (arm, messages) in zip(st.tabs(list(arms)), arms.items(), strict=True):
                with arm_tab:
                    st.caption(ARM_NOTES.get(arm, ""))
                    for message in messages:
                        st.markdown(f"**{message['role']}**")
                        st.code(message["content"], language=None, wrap_lines=True)

if kinds_tab.open:
    with kinds_tab:
        st.caption(
            "The check kinds this installation knows, with the parameters each accepts in a "
            "scenario's `checks:` list (read from the kinds' own parameter models)."
        )
        for kind in au.kind_reference():
            with st.container(border=True):
                sandbox = " · runs the code in the sandbox" if kind.executes_code else ""
                st.markdown(f"#### `kind: {kind.name}`{sandbox}")
                st.markdown(md(kind.description))
                tables = [("Parameters", kind.fields)]
                tables += [(f"Fields of `{holder}:`", fields) for holder, fields in kind.nested]
                for title, fields in tables:
                    st.markdown(f"**{title}**\n\n" + fields_table(fields))
