"""The Results page's header: the run selection, the headline figures and the warnings
about the records; what every tab reads from it.

Session keys start with ``results_``."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from cvb_engine import Aggregates, DataVersion, Reference, RunInfo, Summary, has_layer_arms
from studio import cache, state
from studio.components.text import plain

ss = st.session_state


@dataclass(frozen=True)
class ResultsContext:
    """The selected runs and their figures, as every tab reads them."""

    url: str
    runs: list[RunInfo]
    by_id: dict[str, RunInfo]
    run_ids: tuple[str, ...]
    version: DataVersion
    agg: Aggregates
    summary: Summary
    ref: Reference | None
    layered: bool


def select_runs() -> ResultsContext:
    """Draw the run picker and the headline figures; stops the page while there is nothing
    to show (no run in the store, none picked, nothing scored yet)."""
    url = state.db_url()
    runs = cache.runs_list(url)
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
    version = cache.version_of(run_ids)
    agg = cache.aggregates(url, run_ids, version)
    summary = agg.summary
    ref = cache.reference()

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
        c2.metric(
            "Error records", f"{agg.n_errors:,}", help="API failures: excluded from every rate"
        )
    c3.metric("Models", len(summary.models))
    c4.metric("Scenarios", len(agg.scenarios))
    c5.metric("Prompt version", plain(", ".join(sorted({i.prompt_version for i in infos}))))
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
    return ResultsContext(url, runs, by_id, run_ids, version, agg, summary, ref, layered)
