"""Compare runs: two runs set against each other, arm by arm and gap by gap, then paired on
their shared cells (and two models of one run, paired the same way)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from cvb_engine import compare_summaries, fmt_gap
from studio import cache
from studio.components import charts
from studio.components.text import plain
from studio.views.results import paired
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart, counts, value


def render(ctx: ResultsContext) -> None:
    url, run_ids, runs, by_id = ctx.url, ctx.run_ids, ctx.runs, ctx.by_id
    if len(runs) < 2:
        st.info("Compare runs needs two runs in the store.")
    else:
        ids = [r.id for r in runs]
        default_a, default_b = (run_ids[0], run_ids[1]) if len(run_ids) >= 2 else (ids[1], ids[0])
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
            sa = cache.aggregates(url, (run_a,), cache.version_of((run_a,))).summary
            sb = cache.aggregates(url, (run_b,), cache.version_of((run_b,))).summary
            comparison = compare_summaries(run_a, sa, run_b, sb)
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
                f"prompt version A {plain(pa)}, B {plain(pb)}" + (" (differ)" if pa != pb else "")
            )
            st.caption(" · ".join(notes) + ". Gap rows: A n / B n show each gap's 95% CI.")
            paired.render_paired_runs(url, run_a, run_b)
    paired.render_paired_models(ctx)
