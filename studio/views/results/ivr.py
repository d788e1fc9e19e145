"""IVR: the Intent Violation Rate of the runs, beside the published figures."""

from __future__ import annotations

import html

import streamlit as st

from cvb_engine import ivr_constraint_table, ivr_excluded, ivr_table, published_ivr_table
from studio import cache
from studio.components import charts
from studio.components.tables import draw_table
from studio.components.text import INLINE_LIMIT, block
from studio.views.results.context import ResultsContext
from studio.views.results.style import chart


def render(ctx: ResultsContext) -> None:
    url, run_ids, version, ref = ctx.url, ctx.run_ids, ctx.version, ctx.ref
    results = cache.ivr_results(url, run_ids, version)
    paper = ref.ivr if ref is not None else []
    chart(
        charts.ivr_chart(
            results, published=paper, published_label=ref.ivr_label if ref else "published"
        ),
        "results_fig_ivr",
    )
    draw_table(ivr_table(results))
    failures = ivr_constraint_table(results)
    st.markdown(f"##### {failures.title}")  # cvb's own title, no stored text
    draw_table(failures)
    excluded = ivr_excluded(results)
    if excluded:
        st.caption("Excluded problems (no stated-passing solution):")
        st.text(
            "\n".join(
                block(f"{model} / {arm}: {', '.join(problems)}", limit=INLINE_LIMIT)
                for model, arm, problems in excluded
            )
        )
    st.caption(ivr_table(results).note)
    if ref is not None and ref.ivr:
        st.html(
            '<div style="font-family:system-ui,sans-serif;font-size:14px;color:#57606a">'
            f'<span class="cvb-pub">PUBLISHED</span>{html.escape(ref.ivr_label)}. '
            f"{html.escape(ref.ivr_source)}; temperature "
            f"{html.escape(str(ref.ivr_protocol.get('temperature')))}, "
            f"{html.escape(str(ref.ivr_protocol.get('samples_per_problem')))} samples per "
            "problem.</div>"
        )
        draw_table(published_ivr_table(ref))
