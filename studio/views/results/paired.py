"""Cost per model × arm, and paired comparisons (two runs or two models) with flakiness:
the engine's table models (cvb_engine.cost, cvb_engine.compare) drawn as tables."""

from __future__ import annotations

import streamlit as st

from cvb_engine import (
    PairedComparison,
    comparison_table,
    cost_table,
    flakiness_table,
    flips_table,
)
from studio import cache
from studio.components.tables import draw_table
from studio.components.text import plain
from studio.views.results.context import ResultsContext


def render_costs(ctx: ResultsContext) -> None:
    """The Cost section of the Overview: one table per selected run."""
    st.subheader("Cost")
    per_run = cache.run_costs(ctx.url, ctx.run_ids, ctx.version)
    note = ""
    for run_id, rows in per_run:
        if len(per_run) > 1:
            st.markdown(f"**{plain(run_id)}**")
        if not rows:
            st.caption("No records.")
            continue
        table = cost_table(rows)
        note = table.note
        draw_table(table)
    st.caption(
        plain(note) + " Prices: `--price-in`/`--price-out` when the run started, a preset's, "
        "or the `prices` table of `data/endpoints.json` (README, “Cost”)."
    )


def _comparison(groups: list[PairedComparison]) -> None:
    table = comparison_table(groups)
    draw_table(table)
    st.caption(plain(table.note))
    overall = groups[0] if groups else None
    if overall is None or not overall.pairs:
        st.info("The two share no answered cell: nothing to compare.")
    elif overall.flips:
        with st.expander(f"Flipped cells by scenario ({len(overall.flips)} scenarios)"):
            draw_table(flips_table(overall))
    else:
        st.caption("No shared cell flipped.")


def render_paired_runs(url: str, run_a: str, run_b: str) -> None:
    """Run B against run A on the cells they share, and each run's flakiness."""
    st.subheader("Paired comparison (shared cells)")
    versions = (cache.version_of((run_a,)), cache.version_of((run_b,)))
    groups, flaky_a, flaky_b = cache.paired_runs(url, run_a, run_b, versions)
    _comparison(groups)
    st.subheader("Flakiness")
    for run_id, rows in ((run_a, flaky_a), (run_b, flaky_b)):
        st.markdown(f"**{plain(run_id)}**")
        if any(r.cells for r in rows):
            table = flakiness_table(rows, title=run_id)
            draw_table(table)
        else:
            st.caption("No cell was answered in two or more repetitions.")
    st.caption(plain(flakiness_table([]).note))


def render_paired_models(ctx: ResultsContext) -> None:
    """Two models of one run, on the cells both answered."""
    st.subheader("Two models of one run")
    run_id = st.selectbox(
        "Run",
        list(ctx.run_ids),
        format_func=lambda rid: ctx.by_id[rid].label,
        key="results_pm_run",
    )
    models = cache.aggregates(ctx.url, (run_id,), cache.version_of((run_id,))).summary.models
    if len(models) < 2:
        st.info("This run has one model; pick a run with two or more.")
        return
    k1, k2 = st.columns(2)
    model_a = k1.selectbox("Model A", models, index=0, key="results_pm_a")
    model_b = k2.selectbox("Model B", models, index=1, key="results_pm_b")
    if model_a == model_b:
        st.info("Pick two different models.")
        return
    version = cache.version_of((run_id,))
    _comparison(cache.paired_models(ctx.url, run_id, model_a, model_b, version))
