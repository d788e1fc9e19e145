"""Exports: the Markdown and HTML reports of the selected runs, a run's results file
(JSON) and its records (CSV); each file is built when its button is clicked."""

from __future__ import annotations

import json
from functools import partial

import streamlit as st

from cvb_engine import (
    IVRSummary,
    ReportNotes,
    Summary,
    aggregates,
    export_results,
    file_stem,
    html_report,
    ivr_markdown,
    ivr_results,
    markdown_report,
    records_csv,
    report_notes,
    session_scope,
)
from studio import state
from studio.components.text import plain
from studio.views.results.context import ResultsContext
from studio.views.results.style import downloaded


def _report_inputs(
    url: str, run_ids: tuple[str, ...], root: str
) -> tuple[Summary, dict[tuple[str, str], IVRSummary], ReportNotes]:
    with session_scope(url) as session:
        return (
            aggregates(session, run_ids).summary,
            ivr_results(session, run_ids),
            report_notes(session, run_ids, root),
        )


def markdown_export(
    url: str, run_ids: tuple[str, ...], root: str, title: str, meta: dict[str, str]
) -> str:
    summary_, ivr_, notes = _report_inputs(url, run_ids, root)
    text = markdown_report(summary_, title=title, meta=meta, notes=notes)
    return text + ("\n" + ivr_markdown(ivr_) if ivr_ else "") + "\n"


def html_export(
    url: str, run_ids: tuple[str, ...], root: str, title: str, meta: dict[str, str]
) -> str:
    summary_, ivr_, notes = _report_inputs(url, run_ids, root)
    return html_report(summary_, title=title, meta=meta, ivr_results=ivr_, notes=notes)


def json_export(url: str, run_id: str) -> str:
    with session_scope(url) as session:
        data = export_results(session, run_id)
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def csv_export(url: str, run_id: str) -> str:
    with session_scope(url) as session:
        return records_csv(export_results(session, run_id)["records"])


def render(ctx: ResultsContext) -> None:
    url, run_ids, by_id = ctx.url, ctx.run_ids, ctx.by_id
    st.markdown(
        "Markdown and HTML cover the selected run(s); the results file (JSON) and the CSV "
        "of records are written per run. Each file is built when its button is clicked."
    )
    export_run = run_ids[0]
    if len(run_ids) > 1:
        export_run = st.selectbox("Run for JSON and CSV", run_ids, key="results_export_run")
    prompt_versions = sorted({by_id[r].prompt_version for r in run_ids})
    meta = {"run": ", ".join(run_ids), "prompt version": ", ".join(prompt_versions)}
    title = f"CVB results: {', '.join(run_ids)}"
    scenario_root = str(state.scenarios_root())
    # file names from checked ids only (a stored id may predate the rule, or be hostile)
    stems = [file_stem(r) for r in run_ids]
    stem = "-".join(stems) if len(stems) <= 3 else f"{stems[0]}-and-{len(stems) - 1}"
    export_stem = file_stem(export_run)
    e1, e2, e3, e4 = st.columns(4)
    e1.download_button(
        "Markdown report",
        partial(markdown_export, url, run_ids, scenario_root, title, meta),
        file_name=f"{stem}.md",
        mime="text/markdown",
        key="results_dl_md",
        icon=":material/description:",
        on_click=downloaded,
        args=(f"{stem}.md",),
        width="stretch",
    )
    e2.download_button(
        "Results file (JSON)",
        partial(json_export, url, export_run),
        file_name=f"{export_stem}.json",
        mime="application/json",
        key="results_dl_json",
        icon=":material/data_object:",
        on_click=downloaded,
        args=(f"{export_stem}.json",),
        width="stretch",
    )
    e3.download_button(
        "Records (CSV)",
        partial(csv_export, url, export_run),
        file_name=f"{export_stem}.csv",
        mime="text/csv",
        key="results_dl_csv",
        icon=":material/table:",
        on_click=downloaded,
        args=(f"{export_stem}.csv",),
        width="stretch",
    )
    e4.download_button(
        "HTML report",
        partial(html_export, url, run_ids, scenario_root, title, meta),
        file_name=f"{stem}.html",
        mime="text/html",
        key="results_dl_html",
        icon=":material/web:",
        on_click=downloaded,
        args=(f"{stem}.html",),
        width="stretch",
    )
    st.caption(
        f"**Markdown**: the tables of `cvb report` (strict accuracy with the gap and its CI, "
        "answer outcomes, per-constraint accuracy, counts, by category), whether older "
        "scoring rules judged some records, and the stated limitations of the checks of "
        f"the runs' scenarios under {plain(scenario_root)}. **JSON**: every record of "
        f"{plain(export_run)} with its verdicts and evidence (`cvb-results/2`, what "
        "`cvb report FILE.json` reads back). **CSV**: one row per record. **HTML**: one "
        "self-contained file with inline SVG charts and the published reference figures, "
        "no script; it opens in any browser."
    )
