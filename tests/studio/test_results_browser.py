"""The Results page in a real browser: ``cvb studio`` driven by Playwright through Debian's chromium.

The store is filled by a real run against the loopback fake endpoint
(``fill_store`` in ``test_results_page.py``). Setup: ``scripts/setup.sh``
installs ``chromium`` and ``playwright``; without them the test is skipped with
the reason (a failure under ``CVB_REQUIRE_BROWSER=1``, as in CI). Screenshots go
to ``test-artifacts/``.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    serving_studio,
)
from test_results_page import RUN_ID_B, Filled, fill_store

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
UI_TIMEOUT_MS = 45_000
VIEWPORT = {"width": 1440, "height": 1900}


def settle(page: Any) -> None:
    """Wait until Streamlit has finished the current rerun (its status widget is gone)."""
    time.sleep(0.5)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached")


def select(page: Any, key: str, choice: str) -> None:
    """Pick ``choice`` in the selectbox ``key`` by typing it, as a person would."""
    from playwright.sync_api import expect

    box = page.locator(f".st-key-{key}")
    value = box.locator("input")
    for _ in range(3):  # a rerun that lands mid-typing resets the box: type again
        box.click()
        page.keyboard.type(choice)
        page.keyboard.press("Enter")
        settle(page)
        if re.search(re.escape(choice), value.input_value() or ""):
            return
    expect(value).to_have_value(re.compile(re.escape(choice)))


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[tuple[str, Filled]]:
    """``cvb studio`` on a free port over a store filled by a real run; yields its URL."""
    require_browser()
    filled = fill_store(tmp_path, two_runs=True)
    args = ["--scenarios", str(filled.scenarios)]
    env = {"CVB_DATABASE_URL": filled.db_url}
    with serving_studio(args, tmp_path / "studio.log", env) as url:
        yield url, filled


def test_results_page_in_a_real_browser(studio: tuple[str, Filled], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, _ = studio
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{url}/results")

            # Overview: the newest run is picked by default; the charts draw their bars.
            page.get_by_role("heading", name="Results").first.wait_for()
            expect(page.get_by_role("tab", name="Overview")).to_have_attribute(
                "aria-selected", "true"
            )
            expect(page.locator(".st-key-results_runs")).to_contain_text(RUN_ID_B)  # newest
            for fig in ("arms", "gap", "published", "constraint"):
                page.wait_for_selector(
                    f".st-key-results_fig_{fig} .js-plotly-plot .bars path", state="attached"
                )
            # 2 models x 3 arms, drawn (a zero-height bar is a path too)
            assert page.locator(".st-key-results_fig_arms .bars path").count() == 6
            page.wait_for_selector('[data-testid="stDataFrame"] canvas')
            expect(page.get_by_text("PUBLISHED", exact=True)).to_be_visible()
            # The published figure's model labels are broken into lines, never overlapping.
            ticks = page.locator(".st-key-results_fig_published .xtick text")
            boxes = [ticks.nth(i).bounding_box() for i in range(ticks.count())]
            boxes = sorted((b for b in boxes if b), key=lambda b: b["x"])
            assert len(boxes) >= 2, boxes
            for left, right in itertools.pairwise(boxes):
                assert left["x"] + left["width"] <= right["x"] + 1, (left, right)
            time.sleep(1.5)  # dataframes draw on their canvas a moment after the text
            page.screenshot(path=str(ARTIFACTS / "results-overview.png"))

            # Breakdowns: heatmaps per arm and for the gap.
            page.get_by_role("tab", name="Breakdowns").click()
            page.wait_for_selector(".st-key-results_fig_heat_gap .js-plotly-plot .hm")
            expect(page.get_by_text("Honored only when ordered")).to_be_visible()
            time.sleep(1.5)
            page.screenshot(path=str(ARTIFACTS / "results-breakdowns.png"))

            # Side by side: one scenario, three arms, the violation marked and named.
            page.get_by_role("tab", name="Side by side").click()
            expect(page.get_by_role("heading", name="incentivized", exact=True)).to_be_visible()
            settle(page)
            select(page, "results_sbs_scenario", "security-1")
            select(page, "results_sbs_model", "m-b")
            for arm in ("cold", "mandated", "incentivized"):
                expect(page.get_by_role("heading", name=arm, exact=True)).to_be_visible()
            label = page.locator('[data-check="httpx-not-requests/regex-0"]').first
            expect(label).to_be_visible()
            expect(page.locator("mark.v").first).to_be_visible()
            # Long lines wrap inside their column: no code view scrolls sideways.
            clipped = page.evaluate(
                "[...document.querySelectorAll('.cvb-code')]"
                ".filter(e => e.scrollWidth > e.clientWidth + 1).length"
            )
            assert clipped == 0
            # ... and so do the check labels on marked lines.
            outside = page.evaluate(
                "[...document.querySelectorAll('.cvb-code .tag')].filter(t => {"
                " const box = t.closest('.cvb-code').getBoundingClientRect();"
                " const r = t.getBoundingClientRect();"
                " return r.left < box.left - 1 || r.right > box.right + 1; }).length"
            )
            assert outside == 0
            expect(page.locator('[data-constraint="timeout-set"]').first).to_contain_text(
                "violated"
            )
            page.get_by_text("Prompts each arm received").click()
            expect(page.get_by_text("experienced Python developer").first).to_be_visible()
            page.get_by_text("Prompts each arm received").click()
            time.sleep(1)
            page.screenshot(path=str(ARTIFACTS / "results-side-by-side.png"))

            # Compare runs: the second run against the first.
            page.get_by_role("tab", name="Compare runs").click()
            page.wait_for_selector(
                ".st-key-results_fig_compare .js-plotly-plot .bars path", state="attached"
            )
            time.sleep(1)
            page.screenshot(path=str(ARTIFACTS / "results-compare.png"))

            # Exports: the HTML report downloads, and opens on its own.
            page.get_by_role("tab", name="Exports").click()
            with page.expect_download() as download:
                page.locator(".st-key-results_dl_html button").click()
            expect(page.get_by_text("handed to your browser")).to_be_visible()  # feedback
            report = tmp_path / "report.html"
            download.value.save_as(report)
            text = report.read_text(encoding="utf-8")
            assert text.startswith("<!DOCTYPE html>") and "<script" not in text
            page.goto(report.as_uri())
            expect(page.locator("svg").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "results-html-report.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "results-failure.png"))
            raise
        finally:
            browser.close()
