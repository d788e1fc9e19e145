"""An agent episode's transcript in a real browser: ``cvb studio`` driven by Playwright through
Debian's chromium.

The store (``tests/agent_store.py``) holds an episode whose search query and hits, a file it
read and its last message carry a remote image (``<img src=http://evil.test/...>``), a
Markdown image and link, raw HTML and a directive. Side by side must show them as text: no
such image or link in the DOM, and no request leaves for a host other than the studio's.
The rules lines the agent saw are highlighted and named. Skipped without chromium or
Playwright (a failure under ``CVB_REQUIRE_BROWSER=1``).
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

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import agent_store as ags  # noqa: E402
from conftest import VALID_SCENARIO  # noqa: E402

from cvb_engine.store import dispose_engines  # noqa: E402

REPO = TESTS.parent
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[str]:
    require_browser()
    scenarios = ags.write_scenarios(tmp_path / "scenarios", VALID_SCENARIO)
    url = f"sqlite:///{tmp_path / 'cvb.db'}"
    ags.fill(url, VALID_SCENARIO)
    dispose_engines()
    args = ["--scenarios", str(scenarios)]
    with serving_studio(args, tmp_path / "studio.log", {"CVB_DATABASE_URL": url}) as served:
        yield served


def test_a_hostile_transcript_renders_as_text_and_asks_nothing_outside(studio: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=45_000)  # a shared machine: the studio may take a while
    foreign: list[str] = []

    def watch(route: Any) -> None:
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 2400})
            page.set_default_timeout(45_000)
            page.route("**/*", watch)
            page.on(
                "request",
                lambda r: (
                    None
                    if urlsplit(r.url).hostname in (None, "127.0.0.1")
                    else foreign.append(r.url)
                ),
            )
            page.goto(f"{studio}/results")
            page.get_by_role("heading", name="Results").first.wait_for()
            page.get_by_role("tab", name="Side by side").click()
            expect(page.get_by_role("heading", name=ags.PRELOAD, exact=True)).to_be_visible()
            # the refused call and its reason, as the model was told
            expect(page.get_by_text("read_file(../../etc/passwd) · ✗ refused")).to_be_visible()
            expect(
                page.get_by_text("Refused: '../../etc/passwd' is outside the workspace")
            ).to_be_visible()
            # the README the agent read: its hostile line literally, in a code block
            readme = page.locator("code").filter(has_text="An imaginary product.").first
            readme.scroll_into_view_if_needed()
            expect(readme).to_contain_text(ags.HOSTILE)  # the hostile line, literally
            page.get_by_text("The agent's last message (not scored)").last.click()
            expect(page.get_by_text(ags.HOSTILE, exact=False).first).to_be_visible()
            # the rules lines the agent saw: highlighted and named by their constraint
            expect(page.locator('[data-check="rule: timeout-set"]').first).to_be_visible()
            expect(page.locator('[data-check="rule: httpx-not-requests"]').first).to_be_visible()
            # the final file with the violation its check found
            expect(page.locator('[data-check="timeout-set/regex-0"]').first).to_be_visible()
            time.sleep(2)  # give any image or font a chance to be asked for
            assert page.locator('img[src*="evil.test"]').count() == 0
            assert page.locator('a[href*="evil.test"]').count() == 0
            assert page.locator("b", has_text="bold").count() == 0
            page.screenshot(path=str(ARTIFACTS / "results-agent-transcript.png"), full_page=True)
            page.get_by_role("tab", name="Agent").click()
            expect(page.get_by_text("Read versus obeyed (agent arm)")).to_be_visible()
            page.wait_for_selector('[data-testid="stDataFrame"] canvas')
        finally:
            browser.close()
    assert foreign == [], foreign
