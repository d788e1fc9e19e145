"""Compare runs: two runs set against each other, arm by arm and gap by gap, then paired on
their shared cells (and two models of one run, paired the same way)."""

from __future__ import annotations

import streamlit as st

from cvb_engine import compare_summaries, compare_table
from studio import cache
from studio.components import charts
from studio.components.tables import draw_table
from studio.components.text import plain
from studio.views.results import paired
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart

#: The most names a note lists (a memory sweep has dozens of arms).
NAMES_LISTED = 20


def listed(names: list[str]) -> str:
    """Names from the store as text, the first :data:`NAMES_LISTED` of them."""
    more = len(names) - NAMES_LISTED
    return ", ".join(map(plain, names[:NAMES_LISTED])) + (f" and {more:,} more" if more > 0 else "")


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
            table = compare_table(comparison)
            draw_table(table)
            notes = [
                f"{what} only in {run}: {listed(names)}"
                for what, run, names in (
                    ("models", "A", comparison.only_in_a),
                    ("models", "B", comparison.only_in_b),
                    ("arms (not compared)", "A", comparison.arms_only_in_a),
                    ("arms (not compared)", "B", comparison.arms_only_in_b),
                )
                if names
            ]
            pa, pb = by_id[run_a].prompt_version, by_id[run_b].prompt_version
            notes.append(
                f"prompt version A {plain(pa)}, B {plain(pb)}" + (" (differ)" if pa != pb else "")
            )
            st.caption(" · ".join(notes) + f". {table.note}")
            paired.render_paired_runs(url, run_a, run_b)
    paired.render_paired_models(ctx)
