"""The static HTML report: one self-contained file whose charts carry the engine's numbers."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from cvb_engine.metrics import RecordRow, ivr, summarize_rows
from cvb_engine.reference import load_reference
from cvb_engine.report.fmt import fmt_gap
from cvb_engine.report.html import html_report
from cvb_engine.report.svg import ARM_COLORS

VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line", "path", "circle", "stop"}


def rows(models: tuple[str, ...] = ("m-a", "m-b")) -> list[RecordRow]:
    out = []
    for model in models:
        for i, (sid, cat) in enumerate(
            [("s1", "security"), ("s2", "concurrency"), ("s3", "security")]
        ):
            for arm in ("cold", "mandated", "incentivized"):
                for rep in range(2):
                    honored = arm == "mandated" or (arm == "incentivized" and (i + rep) % 2 == 0)
                    if model == "m-a" and arm == "cold" and rep == 1:
                        out.append(RecordRow(model, sid, cat, arm, "error", None))
                        continue
                    out.append(
                        RecordRow(model, sid, cat, arm, "ok", honored, {"c1": True, "c2": honored})
                    )
    return out


class Checker(HTMLParser):
    """Collects tags, and checks that every non-void element is closed in order."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def parse(page: str) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors, checker.errors[:5]
    assert checker.stack == [], checker.stack
    return checker


def test_report_is_self_contained_and_well_formed() -> None:
    summary = summarize_rows(rows())
    page = html_report(summary, title="CVB results: r1", meta={"run": "r1"})
    assert page.startswith("<!DOCTYPE html>")
    checker = parse(page)
    tags = {t for t, _ in checker.tags}
    assert "script" not in tags and "iframe" not in tags and "img" not in tags
    assert "link" not in tags  # no stylesheet or font fetched from anywhere
    external = [u for u in re.findall(r"https?://[^\s\"')]+", page) if "www.w3.org" not in u]
    assert external == []
    assert "<title>CVB results: r1</title>" in page and "run: <b>r1</b>" in page


def test_bars_and_gap_carry_the_summary_numbers() -> None:
    summary = summarize_rows(rows())
    checker = parse(html_report(summary, reference=None))
    bars = {
        (a["data-model"], a["data-arm"]): a["data-value"]
        for t, a in checker.tags
        if t == "rect" and "data-arm" in a and "data-value" in a
    }
    assert bars == {
        (m, arm): f"{summary.strict[(m, arm)].value:.3f}"
        for m in summary.models
        for arm in summary.arms
    }
    fills = {a["data-arm"]: a["fill"] for t, a in checker.tags if t == "rect" and "data-arm" in a}
    assert fills == {arm: ARM_COLORS[arm] for arm in summary.arms}
    gaps = {a["data-model"]: a["data-gap"] for t, a in checker.tags if "data-gap" in a}
    assert gaps == {m: f"{summary.gap[m].value:.3f}" for m in summary.models}


def test_tables_show_rates_counts_errors_and_the_gap_ci() -> None:
    summary = summarize_rows(rows())
    page = html_report(summary, reference=None)
    cold = summary.strict[("m-a", "cold")]
    assert cold.errors == 3
    assert f'{cold.value:.3f}<span class="n">{cold.k}/{cold.n} · 3 err</span>' in page
    assert fmt_gap(summary.gap["m-b"]) in page
    for cat in summary.categories:
        assert f"<th>{cat}</th>" in page
    assert "<h3>gap (mandated − incentivized) [95% CI]</h3>" in page
    assert "Published reference figures" not in page  # reference=None leaves it out


def test_published_figures_are_labelled_and_hatched() -> None:
    ref = load_reference()
    assert ref is not None
    summary = summarize_rows(rows(("m-a", "llama-3.1-8b-instant")))
    page = html_report(summary)  # the shipped reference by default
    section = page[page.index('<section class="published">') :]
    assert "PUBLISHED" in section and ref.cvb.dates in section and "Groq" in section
    assert 'fill="url(#hatch-mandated)"' in section  # published bars are hatched, never solid
    assert 'fill="url(#hatch-' not in page[: page.index('<section class="published">')]
    assert "0.914" in section and "Models in both: llama-3.1-8b-instant." in section
    assert "(yours: " in section
    # the published gap of a model that is also in the results is drawn in the gap chart
    assert "published: +0.057" in page


@pytest.mark.parametrize("with_ivr", [False, True], ids=["no-ivr", "ivr"])
def test_ivr_section_only_when_there_are_ivr_results(with_ivr: bool) -> None:
    data = rows()
    if with_ivr:
        data += [
            RecordRow("m-a", f"p{i}", "ivr", "cold", "ok", ok, {"c2": ok}, stated_passed=True)
            for i, ok in enumerate([True, False, False])
        ]
    summary = summarize_rows(data)
    page = html_report(summary, ivr_results=ivr(data))
    parse(page)
    assert ("Intent Violation Rate (IVR)" in page) is with_ivr
    if with_ivr:
        assert "0.667" in page and "Published IVR figures" in page
        assert "Claude Sonnet 4.6" in page and "54.5%" in page


def test_untrusted_names_are_escaped() -> None:
    data = [
        RecordRow("<script>alert(1)</script>", "s&1", "c<1>", "mandated", "ok", True, {"x": True})
    ]
    page = html_report(summarize_rows(data), title="<b>t</b>", meta={"run": "<i>"}, reference=None)
    parse(page)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>t</b>" not in page and "<i>" not in page


def test_empty_summary() -> None:
    page = html_report(summarize_rows([]), reference=None)
    parse(page)
    assert "No scored records." in page


def test_outcomes_older_rules_and_limitations() -> None:
    from cvb_engine.report import ReportNotes, markdown
    from cvb_engine.scoring import SCORING_VERSION

    rows = [
        RecordRow("m", "s1", "security", "cold", "ok", False, {"c1": False}, outcome="no-code"),
        RecordRow("m", "s1", "security", "cold", "ok", True, {"c1": True}, outcome="answered"),
        RecordRow(
            "m",
            "s1",
            "security",
            "cold",
            "ok",
            False,
            {"c1": False},
            outcome="unparseable",
            truncated=True,
        ),
        RecordRow("m", "s1", "security", "cold", "ok", True, {"c1": True}, outcome="answered"),
    ]
    summary = summarize_rows(rows)
    notes = ReportNotes({1: 3, SCORING_VERSION: 1}, (("s1", "c1", "Only <b>syntax</b> is seen."),))
    page = html_report(summary, notes=notes, reference=None)
    assert "<h2>Answer outcomes</h2>" in page
    assert "<td>0.500</td><td>0.250</td><td>0.250</td><td>0.250</td><td>1.000 (2/2)</td>" in page
    assert "Judged by older rules" in page and "3 scored record(s)" in page
    assert "Only &lt;b&gt;syntax&lt;/b&gt; is seen." in page
    md = markdown(summary, notes=notes)
    assert "| m | cold | 0.500 | 0.250 | 0.250 | 0.250 | 1.000 (2/2) | 1.000 |" in md
    assert "- `s1` / `c1`: Only &lt;b&gt;syntax&lt;/b&gt; is seen." in md  # text, not HTML
    clean = html_report(summary, notes=ReportNotes({SCORING_VERSION: 4}), reference=None)
    assert "Judged by older rules" not in clean and "Limitations of the checks" not in clean
