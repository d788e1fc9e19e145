"""Results: pick runs; read arm accuracy, the gap with its CI, answer outcomes, breakdowns,
one cell side by side.

The page only lays things out. Figures come from :mod:`cvb_engine.queries`
(aggregated in SQL, the engine's own metric functions) through bounded caches
keyed by the store, the run ids and a data version (record count, highest id,
latest scoring time), so a live run or a re-score is picked up and nothing is
served stale. No chart reads a response text; only the side-by-side view reads
the records of the one cell it shows. Session keys start with ``results_``.
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import streamlit as st
from sqlmodel import Session

from cvb_engine import build_messages, load_file, messages_sha256
from cvb_engine import queries as q
from cvb_engine.metrics import IVRSummary, Rate, Summary
from cvb_engine.report import (
    MEMORY_NOTE,
    OUTCOMES_NOTE,
    ReportNotes,
    arm_title,
    fmt_gap,
    has_layer_arms,
    ivr_markdown,
    markdown,
    memory_tables,
    records_csv,
)
from cvb_engine.report_html import ARM_COLORS, html_report
from cvb_engine.results import export_results
from cvb_engine.store import session_scope
from studio import state
from studio.components import charts, memory_view
from studio.components.code_view import Mark, code_html
from studio.components.text import block, plain, unlinked

OVERVIEW, BREAKDOWNS, SIDE, COMPARE, MEMORY, IVR, EXPORTS = (
    "Overview",
    "Breakdowns",
    "Side by side",
    "Compare runs",
    "Memory",
    "IVR",
    "Exports",
)
# Bounded caches: figures for a handful of run selections, a few dozen cells.
AGG_CACHE: dict[str, Any] = {"max_entries": 16, "ttl": 3600, "show_spinner": False}
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

ss = st.session_state


# --------------------------------------------------------------------------- data (cached)


def _session() -> Session:
    return Session(state.engine(), expire_on_commit=False)


@st.cache_data(max_entries=4, ttl=5, show_spinner=False)
def runs_list(url: str) -> list[q.RunInfo]:
    with _session() as session:
        return q.list_runs(session)


def version_of(run_ids: Sequence[str]) -> q.DataVersion:
    with _session() as session:
        return q.data_version(session, run_ids)


@st.cache_data(**AGG_CACHE)
def aggregates(url: str, run_ids: tuple[str, ...], version: q.DataVersion) -> q.Aggregates:
    with _session() as session:
        return q.aggregates(session, run_ids)


@st.cache_data(**AGG_CACHE)
def ivr_results(
    url: str, run_ids: tuple[str, ...], version: q.DataVersion
) -> dict[tuple[str, str], IVRSummary]:
    with _session() as session:
        return q.ivr_results(session, run_ids)


@st.cache_data(**AGG_CACHE)
def cell_choices(url: str, run_id: str, version: q.DataVersion) -> q.CellChoices:
    with _session() as session:
        return q.cell_choices(session, run_id)


@st.cache_data(**CELL_CACHE)
def cell(
    url: str, run_id: str, model: str, sid: str, rep: int, version: q.DataVersion
) -> dict[str, q.CellRecord]:
    with _session() as session:
        return q.cell_records(session, run_id, model, sid, rep)


@st.cache_data(max_entries=1, show_spinner=False)
def reference() -> q.Reference | None:
    return q.load_reference()


@st.cache_data(max_entries=64, ttl=60, show_spinner=False)
def prompts_for(root: str, scenario_id: str) -> dict[str, Any] | None:
    """The messages each arm would receive now, rebuilt from the scenario file (or None)."""
    paths = sorted(Path(root).glob(f"*/{scenario_id}.yaml"))
    if not paths:
        return None
    try:
        loaded = load_file(paths[0])
    except Exception:  # a broken file is the Author page's business; show no prompts
        return None
    arms = {}
    for arm in ("cold", "mandated", "incentivized"):
        messages = build_messages(loaded.scenario, arm)
        arms[arm] = {"messages": messages, "sha256": messages_sha256(messages)}
    return {"path": str(paths[0]), "sha256": loaded.sha256, "arms": arms}


def _report_inputs(
    url: str, run_ids: tuple[str, ...], root: str
) -> tuple[Summary, dict[tuple[str, str], IVRSummary], ReportNotes]:
    with session_scope(url) as session:
        return (
            q.aggregates(session, run_ids).summary,
            q.ivr_results(session, run_ids),
            q.report_notes(session, run_ids, root),
        )


def markdown_export(
    url: str, run_ids: tuple[str, ...], root: str, title: str, meta: dict[str, str]
) -> str:
    summary_, ivr_, notes = _report_inputs(url, run_ids, root)
    text = markdown(summary_, title=title, meta=meta, notes=notes)
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


# --------------------------------------------------------------------------- formatting


def counts(rate: Rate | None) -> str:
    if rate is None:
        return "–"
    memory = f" · {rate.memory_errors} memory failures" if rate.memory_errors else ""
    return f"{rate.k}/{rate.n} scored · {rate.errors} err{memory}"


def value(rate: Rate | None) -> float | None:
    return None if rate is None else rate.value


def arm_label(arm: str) -> str:
    color = ARM_COLORS.get(arm, "#57606a")
    return f'<span class="cvb-arm" style="background:{color}"></span>{html.escape(arm)}'


def rate_columns(arms: Sequence[str], fmt: str = "%.3f") -> dict[str, Any]:
    # a memory-layer arm is headed with its layer ("memory (bm25)"); data keys stay the arm
    return {
        a: st.column_config.NumberColumn(
            arm_title(summary, a), format=fmt, help=f"strict accuracy, {arm_title(summary, a)}"
        )
        for a in arms
    }


def downloaded(file_name: str) -> None:
    """Say that the export went to the browser (a download button shows nothing else)."""
    st.toast(
        f"{plain(file_name)} was built and handed to your browser: see its downloads.",
        icon=":material/download_done:",
    )


def chart(fig: Any, key: str) -> None:
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, width="stretch")


# --------------------------------------------------------------------------- header


st.html(CSS)
st.title("Results")
url = state.db_url()
runs = runs_list(url)
if not runs:
    st.info(
        "No runs in this store yet. To get one, run `cvb demo` in a terminal (a small "
        "benchmark against the bundled local model: a few minutes, no key), or start a run on "
        "the **Run** page; its results appear here as they are stored.",
        icon=":material/rocket_launch:",
    )
    st.page_link("app_pages/run.py", label="Open the Run page", icon=":material/play_circle:")
    st.stop()

by_id = {r.id: r for r in runs}
if [r for r in ss.get("results_runs", []) if r not in by_id]:
    ss["results_runs"] = [r for r in ss["results_runs"] if r in by_id]
chosen = st.multiselect(
    "Runs",
    list(by_id),
    default=[runs[0].id],
    format_func=lambda rid: by_id[rid].label,
    key="results_runs",
    help="Several runs are pooled (their records counted together); "
    "to set two runs against each other, use Compare runs.",
)
if not chosen:
    st.info("Pick at least one run.")
    st.stop()

run_ids = tuple(sorted(chosen))
version = version_of(run_ids)
agg = aggregates(url, run_ids, version)
summary = agg.summary
ref = reference()
has_ivr = version.has_ivr

infos = [by_id[r] for r in run_ids]
layered = has_layer_arms(summary)
c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Scored records", f"{agg.n_scored:,}")
if layered:
    c2.metric(
        "API errors · memory failures",
        f"{agg.n_errors:,} · {agg.n_memory_errors:,}",
        help="API failures (the endpoint) and memory failures (a memory layer failed): "
        "both excluded from every rate, counted apart; neither is a violation",
    )
else:
    c2.metric("Error records", f"{agg.n_errors:,}", help="API failures: excluded from every rate")
c3.metric("Models", len(summary.models))
c4.metric("Scenarios", len(agg.scenarios))
c5.metric("Prompt version", ", ".join(sorted({i.prompt_version for i in infos})))
live = [i.id for i in infos if i.status in ("running", "created")]
st.caption(
    f"{len(run_ids)} run(s){' pooled' if len(run_ids) > 1 else ''} · {agg.n_scored:,} scored "
    f"records · {agg.n_errors:,} error record(s) (API failures, excluded from every denominator)"
    + (
        f" · {agg.n_memory_errors:,} memory failure(s) (a memory layer failed: excluded too, "
        "neither an API failure nor a violation)"
        if layered
        else ""
    )
    + (
        f" · still running: {', '.join(plain(r) for r in live)} (figures refresh as records arrive)"
        if live
        else ""
    )
)
if agg.older_rules_text:
    st.warning(agg.older_rules_text, icon=":material/history:")
if agg.weaker_sandbox:
    st.warning(plain(agg.sandbox_text), icon=":material/shield:")
else:
    st.caption(plain(agg.sandbox_text))
if not summary.models:
    st.warning("These runs have no scored records yet.")
    st.stop()

views = (
    [OVERVIEW, BREAKDOWNS, SIDE, COMPARE]
    + ([MEMORY] if summary.memory or summary.tool_use else [])
    + ([IVR] if has_ivr else [])
    + [EXPORTS]
)
if ss.get("results_view") not in views:
    ss["results_view"] = OVERVIEW
tabs = dict(
    zip(views, st.tabs(views, key="results_view", on_change="rerun", default=OVERVIEW), strict=True)
)

# --------------------------------------------------------------------------- overview

if tabs[OVERVIEW].open:
    with tabs[OVERVIEW]:
        arms = summary.arms
        published = ref.cvb if ref is not None else None
        left, right = st.columns([3, 2], gap="medium")
        with left:
            chart(charts.arm_accuracy(summary, published=published), "results_fig_arms")
        with right:
            chart(charts.gap_with_ci(summary, published=published), "results_fig_gap")
        if published is not None and set(published.models) & set(summary.models):
            st.caption(
                "◇ Hollow diamonds: the published figure for the same model "
                f"({published.label}, {published.dates})."
            )

        st.subheader("Strict accuracy, gap and counts")
        rows = []
        for m in summary.models:
            row: dict[str, Any] = {"model": m}
            for a in arms:
                row[a] = value(summary.strict.get((m, a)))
            gap = summary.gap.get(m)
            row["gap [95% CI]"] = fmt_gap(gap)
            row["scenarios"] = gap.n_units if gap is not None else 0
            for a in arms:
                row[f"{a} n"] = counts(summary.strict.get((m, a)))
            rows.append(row)
        st.dataframe(
            rows,
            hide_index=True,
            width="stretch",
            column_config={
                **rate_columns(arms),
                "gap [95% CI]": st.column_config.TextColumn(
                    help="mandated − incentivized strict accuracy; paired bootstrap over "
                    "scenarios, 10,000 resamples, fixed seed"
                ),
                "scenarios": st.column_config.NumberColumn(
                    help="scenarios resampled by the gap's bootstrap"
                ),
            },
        )
        st.caption(
            "Strict accuracy: share of scored records with every constraint honored. "
            "`k/n scored · e err`: strictly accurate / scored records, and error records "
            "(API failures) that are left out of the rate"
            + (
                "; memory failures (a memory layer failed) are left out too and counted apart."
                if layered
                else "."
            )
        )

        outcome_table = agg.outcome_table()
        if outcome_table:
            st.subheader("Answer outcomes")
            st.dataframe(
                outcome_table,
                hide_index=True,
                width="stretch",
                column_config={
                    "truncated": st.column_config.TextColumn(
                        help="share stopped at max_tokens (any outcome)"
                    ),
                    "strict among answered": st.column_config.TextColumn(
                        help="strictly accurate / answered records"
                    ),
                    "per-constraint among answered": st.column_config.TextColumn(
                        help="honored (record, constraint) pairs of answered records"
                    ),
                },
            )
            st.caption(OUTCOMES_NOTE)

        st.subheader("Per-constraint accuracy")
        cl, cr = st.columns([1, 1], gap="medium")
        with cl:
            chart(charts.constraint_accuracy(summary), "results_fig_constraint")
        with cr:
            crow = []
            for m in summary.models:
                r: dict[str, Any] = {"model": m}
                for a in arms:
                    r[f"{a} per-constraint"] = value(summary.constraint.get((m, a)))
                r["pairs honored"] = " · ".join(
                    f"{x.k}/{x.n}" if (x := summary.constraint.get((m, a))) else "–" for a in arms
                )
                crow.append(r)
            st.dataframe(
                crow,
                hide_index=True,
                width="stretch",
                column_config={
                    f"{a} per-constraint": st.column_config.NumberColumn(a, format="%.3f")
                    for a in arms
                },
            )
            st.caption(
                "Honored (record, constraint) pairs / all pairs, IFEval-style; "
                f"pairs honored per arm in the order {', '.join(arms)}."
            )

        if published is not None:
            st.subheader("Published reference figures")
            st.html(
                '<div style="font-family:system-ui,sans-serif;font-size:14px;color:#57606a">'
                f'<span class="cvb-pub">PUBLISHED</span>{html.escape(published.label)}, '
                f"{html.escape(published.dates)}: not produced by this studio; shown for "
                "comparison only.</div>"
            )
            pl, pr = st.columns([1, 1], gap="medium")
            with pl:
                chart(charts.published_accuracy(published), "results_fig_published")
            with pr:
                overlap = set(published.models) & set(summary.models)
                st.dataframe(
                    [
                        {
                            "model (published)": m,
                            **{
                                a: published.strict[m].get(a)
                                for a in ("cold", "mandated", "incentivized")
                            },
                            "gap": published.gap.get(m),
                            **(
                                {"your gap": fmt_gap(summary.gap.get(m)) if m in overlap else "–"}
                                if overlap
                                else {}
                            ),
                        }
                        for m in published.models
                    ],
                    hide_index=True,
                    width="stretch",
                    column_config={
                        **rate_columns(("cold", "mandated", "incentivized")),
                        "gap": st.column_config.NumberColumn(format="%+.3f"),
                    },
                )
                protocol = published.protocol
                st.caption(
                    f"Source: {plain(published.source)}. {plain(protocol.get('endpoint', ''))}, "
                    f"temperature {plain(protocol.get('temperature'))}, "
                    f"{plain(protocol.get('runs_per_arm'))} runs per arm, "
                    f"{plain(protocol.get('scenarios'))} scenarios, prompt version "
                    f"{plain(protocol.get('prompt_version'))}, {plain(protocol.get('records'))} "
                    "records. Published without confidence intervals."
                )

# --------------------------------------------------------------------------- breakdowns

if tabs[BREAKDOWNS].open:
    with tabs[BREAKDOWNS]:
        f1, f2, f3 = st.columns([2, 3, 2])
        f_models = f1.multiselect(
            "Models", summary.models, key="results_f_models", placeholder="all models"
        )
        f_cats = f2.multiselect(
            "Categories", summary.categories, key="results_f_cats", placeholder="all categories"
        )
        f_arms = f3.multiselect("Arms", summary.arms, key="results_f_arms", placeholder="all arms")
        arms = [a for a in summary.arms if not f_arms or a in f_arms]
        has_gap = "mandated" in summary.arms and "incentivized" in summary.arms

        st.subheader("By category")
        st.caption(
            "Strict accuracy per model × category for each arm (cells: rate and strictly "
            "accurate / scored), then the gap per category (hover for its 95% CI)."
        )
        for which in [*arms] + (["gap"] if has_gap else []):
            chart(
                charts.category_heatmap(summary, which, models=f_models, categories=f_cats),
                f"results_fig_heat_{which}",
            )

        st.subheader("By scenario")
        srows = []
        for r_ in q.scenario_rows(agg, models=f_models, categories=f_cats):
            row = {"model": r_.model, "scenario": r_.scenario_id, "category": r_.category}
            row.update({a: value(r_.rates.get(a)) for a in arms})
            row["gap"] = r_.gap
            row.update({f"{a} n": counts(r_.rates.get(a)) for a in arms})
            srows.append(row)
        st.dataframe(
            srows,
            hide_index=True,
            width="stretch",
            height=min(420, 38 + 35 * max(len(srows), 1)),
            column_config={
                **rate_columns(arms),
                "gap": st.column_config.NumberColumn(
                    format="%+.3f", help="mandated − incentivized, this scenario"
                ),
            },
        )
        st.caption("Largest gap first. Open a scenario in **Side by side** to read the outputs.")

        st.subheader("Honored only when ordered")
        st.caption(
            "Constraints honored more often under orders (mandated) than as project memory "
            "(incentivized), largest difference first."
        )
        orows = [
            {
                "model": r_.model,
                "scenario": r_.scenario_id,
                "constraint": r_.constraint_id,
                "category": r_.category,
                "mandated": value(r_.rates.get("mandated")),
                "incentivized": value(r_.rates.get("incentivized")),
                "mandated − incentivized": r_.gap,
                "mandated n": counts(r_.rates.get("mandated")).split(" scored")[0],
                "incentivized n": counts(r_.rates.get("incentivized")).split(" scored")[0],
            }
            for r_ in q.only_when_ordered(agg, models=f_models, categories=f_cats)
        ]
        if orows:
            st.dataframe(
                orows,
                hide_index=True,
                width="stretch",
                column_config={
                    "mandated": st.column_config.NumberColumn(format="%.3f"),
                    "incentivized": st.column_config.NumberColumn(format="%.3f"),
                    "mandated − incentivized": st.column_config.ProgressColumn(
                        format="%.3f", min_value=0.0, max_value=1.0
                    ),
                },
            )
        else:
            st.success("No constraint is honored more often as an order than as memory here.")

        with st.expander("Every constraint, per arm"):
            crows = []
            for r_ in q.constraint_rows(agg, models=f_models, categories=f_cats):
                row = {
                    "model": r_.model,
                    "scenario": r_.scenario_id,
                    "constraint": r_.constraint_id,
                    "category": r_.category,
                }
                row.update({a: value(r_.rates.get(a)) for a in arms})
                row.update(
                    {
                        f"{a} honored": f"{x.k}/{x.n}" if (x := r_.rates.get(a)) else "–"
                        for a in arms
                    }
                )
                crows.append(row)
            st.dataframe(crows, hide_index=True, width="stretch", column_config=rate_columns(arms))

# --------------------------------------------------------------------------- side by side


OUTCOME_WORDS = {"answered": "answered", "unparseable": "unparseable", "no-code": "no code"}


def badges_html(record: q.CellRecord) -> str:
    if record.status != "ok":
        what = "memory failure" if record.memory_failure else "API error"
        return (
            f'<div class="cvb-badges"><span class="cvb-badge err">{what}: not scored</span></div>'
        )

    out = ['<div class="cvb-badges">']
    if record.outcome is not None:
        cls = "out" if record.outcome == "answered" else "bad"
        word = OUTCOME_WORDS.get(record.outcome, record.outcome)
        out.append(
            f'<span class="cvb-badge {cls}" data-outcome="{html.escape(record.outcome)}" '
            f'title="answer outcome">{html.escape(word)}</span>'
        )
    if record.truncated:
        out.append(
            '<span class="cvb-badge err" data-outcome="truncated" '
            'title="the endpoint stopped at max_tokens">truncated</span>'
        )
    if record.response_cut:
        out.append(
            '<span class="cvb-badge err" data-outcome="cut" '
            'title="the reply was longer than --max-response-chars: cvb stored it cut">'
            "stored cut</span>"
        )
    if record.older_rules:
        out.append(
            f'<span class="cvb-badge err" data-scoring="{record.rules}" title="judged by older '
            f'scoring rules: re-score the run">scoring v{record.rules} · older rules</span>'
        )
    for c in record.constraints:
        cls, mark, word = ("ok", "✓", "honored") if c.honored else ("bad", "✗", "violated")
        out.append(
            f'<span class="cvb-badge {cls}" data-constraint="{html.escape(c.constraint_id)}" '
            f'title="{word}">{mark} {html.escape(c.constraint_id)} · {word}</span>'
        )
    out.append("</div>")
    why = [
        f"<li><code>{html.escape(ch.label(c.constraint_id))}</code> {html.escape(ch.reason)}</li>"
        for c in record.constraints
        for ch in c.failed
    ]
    if why:
        out.append(f'<ul class="cvb-why">{"".join(why)}</ul>')
    return "".join(out)


def marks_of(record: q.CellRecord, scope: str) -> list[Mark]:
    text = record.code if scope == "code" else record.response
    return [
        Mark(line, col_, length, ch.label(c.constraint_id), ch.reason, not ch.passed)
        for c in record.constraints
        for ch in c.checks
        if ch.scope == scope
        for span in ch.evidence
        for line, col_, length in q.split_span(text, *span)
    ]


def show_record(record: q.CellRecord | None, arm: str) -> None:
    st.markdown(f"#### {plain(arm_title(summary, arm))}")
    if record is None:
        st.info("No record for this arm in the run.")
        return
    memory_view.show(record)  # a memory arm's layer, its context or tool calls: above the code
    if record.status != "ok":
        st.html(badges_html(record))
        if record.memory_failure:
            return  # the memory panel shows the layer's message
        # The server's words: literal text, never Markdown.
        st.error("The request failed; the endpoint said:", icon=":material/error:")
        st.code(block(record.error or "(no message)"), language=None, wrap_lines=True)
        return
    n = len(record.constraints)
    bad = len(record.violated)
    verdict = (
        ":green[:material/check_circle: every constraint honored]"
        if record.strict
        else f":red[:material/cancel: no code in the reply: honors none of {n} constraint(s)]"
        if record.outcome == "no-code"
        else f":red[:material/cancel: violates {bad} of {n} constraint(s)]"
    )
    st.markdown(verdict)
    st.html(badges_html(record))
    st.html(code_html(record.code or "# (no code in the response)", marks_of(record, "code")))
    response_marks = marks_of(record, "response")
    with st.expander("Full response" + (" (with marks)" if response_marks else "")):
        if response_marks:
            st.html(code_html(record.response, response_marks))
        else:
            st.text(block(record.response))
    if record.reasoning:
        with st.expander("Reasoning (separate field, not scored)"):
            st.code(block(record.reasoning), language=None, wrap_lines=True)
    tokens = f"{record.prompt_tokens or 0}+{record.completion_tokens or 0} tokens"
    latency = f"{record.latency_s:.2f} s" if record.latency_s is not None else "–"
    st.caption(
        f"record {record.id} · {latency} · {tokens} · finish {plain(record.finish_reason or '–')}"
    )


if tabs[SIDE].open:
    with tabs[SIDE]:
        run_pick = run_ids[0]
        if len(run_ids) > 1:
            run_pick = st.selectbox("Run", run_ids, key="results_sbs_run")
        choices = cell_choices(url, run_pick, version)
        s1, s2, s3 = st.columns([3, 2, 1])
        model = s2.selectbox("Model", choices.models, key="results_sbs_model")

        sid = s1.selectbox(
            "Scenario",
            list(choices.scenarios),
            format_func=lambda x: f"{x} · {choices.scenarios[x]}",
            key="results_sbs_scenario",
        )
        rep = s3.selectbox("Repetition", choices.reps, key="results_sbs_rep")
        if model is None or sid is None or rep is None:
            st.info("This run has no records yet.")
        else:
            pooled = " · ".join(
                f"{plain(a)} {r.value:.2f} ({r.k}/{r.n})"
                for a in choices.arms
                if (r := summary.by_scenario.get((model, a, sid))) and r.value is not None
            )
            st.caption(
                f"Strict accuracy of {plain(model)} on {plain(sid)} over every repetition"
                f"{' of the selected runs' if len(run_ids) > 1 else ''}: {pooled}"
            )
            stacked = st.toggle(
                "One arm per row (for long lines)", key="results_sbs_stacked", value=False
            )
            records = cell(url, run_pick, model, sid, int(rep), version)
            slots = (
                [st.container() for _ in choices.arms]
                if stacked
                else st.columns(len(choices.arms), gap="small")
            )
            for slot, arm in zip(slots, choices.arms, strict=True):
                with slot:
                    show_record(records.get(arm), arm)

            st.subheader("Diff between two arms")
            d1, d2, _ = st.columns([1, 1, 2])
            present = [a for a in choices.arms if a in records]
            a_arm = d1.selectbox("From", present, index=0, key="results_sbs_diff_a")
            b_arm = d2.selectbox("To", present, index=len(present) - 1, key="results_sbs_diff_b")
            failed = [a for a in (a_arm, b_arm) if a and records[a].status != "ok"]
            if failed:
                st.info(
                    "No diff: "
                    + ", ".join(
                        f"{plain(a)} is "
                        + ("a memory failure" if records[a].memory_failure else "an API error")
                        for a in failed
                    )
                    + " record (no code)."
                )
            elif a_arm and b_arm:
                a_code, b_code = records[a_arm].code, records[b_arm].code
                diff = "\n".join(
                    difflib.unified_diff(
                        a_code.splitlines(),
                        b_code.splitlines(),
                        fromfile=f"{a_arm}",
                        tofile=f"{b_arm}",
                        lineterm="",
                    )
                )
                st.code(diff or "(identical code)", language="diff")

            prompts = prompts_for(str(state.scenarios_root()), sid)
            with st.expander("Prompts each arm received"):
                if prompts is None:
                    st.warning(
                        f"The scenario file {plain(sid)}.yaml is not under "
                        f"{plain(state.scenarios_root())}: its prompts cannot be rebuilt here."
                    )
                else:
                    ptabs = st.tabs([a for a in choices.arms if a in prompts["arms"]])
                    for ptab, arm in zip(
                        ptabs, [a for a in choices.arms if a in prompts["arms"]], strict=True
                    ):
                        with ptab:
                            p = prompts["arms"][arm]
                            sent = records.get(arm)
                            if sent is not None and sent.messages_sha256 == p["sha256"]:
                                st.caption(
                                    f"Rebuilt from {plain(prompts['path'])}: byte-identical to "
                                    f"what was sent (messages sha256 {p['sha256'][:12]}…)."
                                )
                            elif sent is not None:
                                st.warning(
                                    "The scenario file changed since this record was generated: "
                                    "what is shown is today's prompt, not the one sent "
                                    f"(sent {plain(sent.messages_sha256[:12])}…, "
                                    f"now {p['sha256'][:12]}…)."
                                )
                            for message in p["messages"]:
                                st.markdown(f"**{message['role']}**")
                                st.code(message["content"], language=None, wrap_lines=True)

# --------------------------------------------------------------------------- compare runs

if tabs[COMPARE].open:
    with tabs[COMPARE]:
        if len(runs) < 2:
            st.info("Compare runs needs two runs in the store.")
        else:
            ids = [r.id for r in runs]
            default_a, default_b = (
                (run_ids[0], run_ids[1]) if len(run_ids) >= 2 else (ids[1], ids[0])
            )
            k1, k2 = st.columns(2)
            run_a = k1.selectbox(
                "Run A (baseline)",
                ids,
                index=ids.index(default_a),
                format_func=lambda rid: by_id[rid].label,
                key="results_cmp_a",
            )
            run_b = k2.selectbox(
                "Run B",
                ids,
                index=ids.index(default_b),
                format_func=lambda rid: by_id[rid].label,
                key="results_cmp_b",
            )
            if run_a == run_b:
                st.info("Pick two different runs.")
            else:
                sa = aggregates(url, (run_a,), version_of((run_a,))).summary
                sb = aggregates(url, (run_b,), version_of((run_b,))).summary
                comparison = q.compare_summaries(run_a, sa, run_b, sb)
                chart(charts.comparison_deltas(comparison), "results_fig_compare")
                drows: list[dict[str, Any]] = []
                for d in comparison.arm_deltas:
                    drows.append(
                        {
                            "model": d.model,
                            "arm": d.arm,
                            "A": value(d.a),
                            "B": value(d.b),
                            "Δ": d.delta,
                            "A n": counts(d.a),
                            "B n": counts(d.b),
                        }
                    )
                for g in comparison.gap_deltas:
                    drows.append(
                        {
                            "model": g.model,
                            "arm": "gap",
                            "A": g.a.value if g.a else None,
                            "B": g.b.value if g.b else None,
                            "Δ": g.delta,
                            "A n": fmt_gap(g.a),
                            "B n": fmt_gap(g.b),
                        }
                    )
                st.dataframe(
                    drows,
                    hide_index=True,
                    width="stretch",
                    column_config={
                        "A": st.column_config.NumberColumn(f"A: {run_a}", format="%.3f"),
                        "B": st.column_config.NumberColumn(f"B: {run_b}", format="%.3f"),
                        "Δ": st.column_config.NumberColumn("Δ (B − A)", format="%+.3f"),
                    },
                )
                notes = []
                if comparison.only_in_a:
                    notes.append(f"only in A: {', '.join(map(plain, comparison.only_in_a))}")
                if comparison.only_in_b:
                    notes.append(f"only in B: {', '.join(map(plain, comparison.only_in_b))}")
                pa, pb = by_id[run_a].prompt_version, by_id[run_b].prompt_version
                notes.append(
                    f"prompt version A {plain(pa)}, B {plain(pb)}"
                    + (" (differ)" if pa != pb else "")
                )
                st.caption(" · ".join(notes) + ". Gap rows: A n / B n show each gap's 95% CI.")

# --------------------------------------------------------------------------- memory

if MEMORY in tabs and tabs[MEMORY].open:
    with tabs[MEMORY]:
        st.caption(MEMORY_NOTE)
        if summary.memory:
            chart(charts.memory_curve(summary), "results_fig_memory")
        for table in memory_tables(summary):
            st.markdown(f"##### {table.title}")
            # names in the cells (models, arms, layers) come from outside: a dataframe
            # shows them as text
            st.dataframe(
                [dict(zip(table.header, row, strict=True)) for row in table.rows],
                hide_index=True,
                width="stretch",
            )
            if table.note:
                st.caption(table.note)

# --------------------------------------------------------------------------- IVR

if IVR in tabs and tabs[IVR].open:
    with tabs[IVR]:
        results = ivr_results(url, run_ids, version)
        paper = ref.ivr if ref is not None else []
        chart(
            charts.ivr_chart(
                results, published=paper, published_label=ref.ivr_label if ref else "published"
            ),
            "results_fig_ivr",
        )
        # The report's Markdown escapes every value; only bare URLs are left to break.
        st.markdown(unlinked(ivr_markdown(results).replace("## Intent Violation Rate (IVR)", "")))
        if ref is not None:
            st.html(
                '<div style="font-family:system-ui,sans-serif;font-size:14px;color:#57606a">'
                f'<span class="cvb-pub">PUBLISHED</span>{html.escape(ref.ivr_label)}: '
                + "; ".join(
                    f"{html.escape(p.model)} stated-test pass {p.stated_pass_rate:.1%}, "
                    f"IVR {p.ivr:.1%}"
                    for p in ref.ivr
                )
                + f". {html.escape(ref.ivr_source)}; temperature "
                f"{ref.ivr_protocol.get('temperature')}, "
                f"{ref.ivr_protocol.get('samples_per_problem')} samples per problem.</div>"
            )

# --------------------------------------------------------------------------- exports

if tabs[EXPORTS].open:
    with tabs[EXPORTS]:
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
        stem = "-".join(run_ids) if len(run_ids) <= 3 else f"{run_ids[0]}-and-{len(run_ids) - 1}"
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
            file_name=f"{export_run}.json",
            mime="application/json",
            key="results_dl_json",
            icon=":material/data_object:",
            on_click=downloaded,
            args=(f"{export_run}.json",),
            width="stretch",
        )
        e3.download_button(
            "Records (CSV)",
            partial(csv_export, url, export_run),
            file_name=f"{export_run}.csv",
            mime="text/csv",
            key="results_dl_csv",
            icon=":material/table:",
            on_click=downloaded,
            args=(f"{export_run}.csv",),
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
