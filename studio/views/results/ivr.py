"""IVR: the Intent Violation Rate of the runs, beside the published figures."""

from __future__ import annotations

import html

import streamlit as st

from cvb_engine import ivr_markdown
from studio import cache
from studio.components import charts
from studio.components.text import unlinked
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
    # The report's Markdown escapes every value; only bare URLs are left to break.
    st.markdown(unlinked(ivr_markdown(results).replace("## Intent Violation Rate (IVR)", "")))
    if ref is not None:
        st.html(
            '<div style="font-family:system-ui,sans-serif;font-size:14px;color:#57606a">'
            f'<span class="cvb-pub">PUBLISHED</span>{html.escape(ref.ivr_label)}: '
            + "; ".join(
                f"{html.escape(p.model)} stated-test pass {p.stated_pass_rate:.1%}, IVR {p.ivr:.1%}"
                for p in ref.ivr
            )
            + f". {html.escape(ref.ivr_source)}; temperature "
            f"{ref.ivr_protocol.get('temperature')}, "
            f"{ref.ivr_protocol.get('samples_per_problem')} samples per problem.</div>"
        )
