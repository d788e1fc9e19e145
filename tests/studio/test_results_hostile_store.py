"""A teammate's store is untrusted input: every Results view in a real browser, over a
store whose every stored string (model, category, arm, scenario and constraint ids, the
prompt version, the run's note, replies, code, reasoning, finish reasons, check reasons)
carries Markdown and HTML payloads, some with ``../`` ids and past the view's budgets.

Nothing may leave the page for another host, no script may run, no payload may render
as markup, and no view may show a traceback. (Headless Chromium through Playwright, as
the other browser tests; skipped without them, a failure under ``CVB_REQUIRE_BROWSER=1``.)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, require_browser, serving_studio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stored_runs import add_run

from cvb_engine.store import dispose_engines

#: Markdown, HTML and script that would fetch from or act for another host if rendered.
PAYLOAD = (
    "![x](http://evil.test/i.png) [click](http://evil.test/l) "
    '<img src="http://evil.test/h.png" onerror="window.__pwned=1"> <b>bold</b> '
    "<script>window.__pwned=2</script> :red[red] $x^2$ www.evil.test a@evil.test "
    '<iframe src="http://evil.test/f"></iframe> <a href="javascript:window.__pwned=3">j</a>'
)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
VIEWS = ("Overview", "Breakdowns", "Side by side", "Compare runs", "Memory", "IVR", "Exports")


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[str]:
    require_browser()
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    arms = ("cold", "mandated", "incentivized", "incentivized@load=4", f"arm {PAYLOAD}")
    # the second is the newest: the page opens on it
    for run_id, scenarios in (
        ("hostile-b", ["s-0", "s-1"]),
        ("hostile-a", [f"../../{PAYLOAD}", *(f"s-{i}" for i in range(3))]),
    ):
        add_run(
            url,
            run_id,
            models=(f"m1 {PAYLOAD}", "m2"),
            scenarios=scenarios,
            category=PAYLOAD,
            text=PAYLOAD,
            prompt_version=PAYLOAD,
            reason=PAYLOAD,
            constraint=f"c {PAYLOAD}",
            evidence=500,  # past the view's span budget
            arms=arms,
            stated=True,
        )
    dispose_engines()
    library = tmp_path / "scenarios"
    library.mkdir()
    with serving_studio(
        ["--scenarios", str(library)], tmp_path / "studio.log", {"CVB_DATABASE_URL": url}
    ) as served:
        yield served


def test_every_results_view_shows_a_hostile_store_as_text(studio: str) -> None:
    from playwright.sync_api import sync_playwright

    foreign: list[str] = []

    def watch(route: Any) -> None:
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1900})
            page.set_default_timeout(60_000)
            page.route("**/*", watch)
            page.goto(f"{studio}/results")
            page.get_by_role("heading", name="Results").first.wait_for()
            page.get_by_role("tab", name="Overview").wait_for()
            ARTIFACTS.mkdir(exist_ok=True)
            seen = []
            for view in VIEWS:
                tab = page.get_by_role("tab", name=view)
                assert tab.count() == 1, f"no {view} view"
                tab.click()
                time.sleep(1)
                page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached")
                if view == "Side by side":
                    for label in ("Full response", "Reasoning"):
                        page.get_by_text(label).first.click()
                time.sleep(1.5)  # give an image, a frame or a font the time to be asked for
                name = view.lower().replace(" ", "-")
                page.screenshot(path=str(ARTIFACTS / f"results-hostile-{name}.png"), full_page=True)
                text = page.inner_text("body")
                if view == "Side by side":  # the reply, literally, and the budget said
                    assert "<b>bold</b>" in text and "more evidence spans not shown" in text
                assert "Traceback" not in text, view
                assert page.locator('[data-testid="stException"]').count() == 0, view
                assert page.evaluate("window.__pwned") is None, view
                for selector in (
                    'img[src*="evil.test"]',
                    'a[href*="evil.test"]',
                    'a[href^="javascript:"]',
                    'iframe[src*="evil.test"]',
                    'script:has-text("__pwned")',
                ):
                    assert page.locator(selector).count() == 0, (view, selector)
                assert page.locator("b", has_text="bold").count() == 0, view
                seen.append(view)
            # the payload is on the page as text (the run's prompt version, in the header)
            assert "<b>bold</b>" in page.inner_text("body")
        finally:
            browser.close()
    assert seen == list(VIEWS)
    assert foreign == [], foreign
