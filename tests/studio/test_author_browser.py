"""The Author page in a real browser: ``cvb studio`` driven by Playwright through Debian's chromium.

Setup: ``scripts/setup.sh`` (what ``.ci/run`` does) installs
``chromium`` and ``playwright`` (no browser download). Without them the test
is skipped with the reason (a failure under ``CVB_REQUIRE_BROWSER=1``, as in CI). Screenshots go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    serving_studio,
)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
FACT = "The team standardized on httpx after requests caused the March socket-exhaustion incident."
ORDER = "The team must use httpx after requests caused the March socket-exhaustion incident."
VIOLATING = (
    "import requests\n\n\ndef fetch_json(url):\n    return requests.get(url, timeout=5).json()\n"
)
UI_TIMEOUT_MS = 30_000


@pytest.fixture
def studio(scenario_dir: Path, tmp_path: Path) -> Iterator[str]:
    """``cvb studio`` on a free port over a temporary library and store; yields its URL."""
    require_browser()
    args = ["--scenarios", str(scenario_dir), "--db", f"sqlite:///{tmp_path / 'cvb.db'}"]
    env = {"CVB_DRAFTS": str(tmp_path / "drafts")}
    with serving_studio(args, tmp_path / "studio.log", env) as url:
        yield url


def test_violation_highlighted_in_a_real_browser(studio: str, scenario_dir: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    path = scenario_dir / "library-choice" / "http-client-choice.yaml"
    original = path.read_text(encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1700})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(studio)

            # Library: the table, then open the scenario through the Open box.
            page.get_by_text("Open a scenario").wait_for()
            page.wait_for_selector('[data-testid="stDataFrame"] canvas')
            page.locator(".st-key-author_pick").click()
            page.keyboard.type("http-client")
            page.keyboard.press("Enter")
            page.locator(".st-key-author_open button").click()

            # Editor: an order in the constraint text is E010, shown with its line.
            editor = page.locator(".st-key-author_yaml textarea")
            expect(editor).to_have_value(original)
            editor.fill(original.replace(FACT, ORDER))
            editor.press("Control+Enter")
            finding = page.locator('[data-code="E010"]')
            expect(finding).to_contain_text("imperative wording 'must'")
            expect(finding).to_contain_text("The team must use httpx")
            expect(page.locator(".st-key-author_save button")).to_be_disabled()
            page.screenshot(path=str(ARTIFACTS / "author-editor-lint.png"))
            editor.fill(original)
            editor.press("Control+Enter")
            expect(page.locator('[data-code="E010"]')).to_have_count(0)

            # Check playground: violating code is marked and labelled by its check.
            page.get_by_role("tab", name="Check playground").click()
            code = page.locator(".st-key-author_code textarea")
            code.fill(VIOLATING)
            code.press("Control+Enter")
            expect(page.locator("mark.v").first).to_be_visible()
            label = page.locator('[data-check="httpx-not-requests/regex-0"]')
            expect(label).to_be_visible()
            expect(label).to_contain_text("httpx-not-requests/regex-0")
            expect(page.get_by_text("Violates 1 of 2 constraint(s)")).to_be_visible()
            page.wait_for_selector('[data-testid="stDataFrame"] canvas')
            time.sleep(1)  # the samples table draws on its canvas a moment later
            page.screenshot(path=str(ARTIFACTS / "author-playground.png"))

            # Save: back in the editor, a version bump goes to the scenario's own file.
            page.get_by_role("tab", name="Editor").click()
            editor = page.locator(".st-key-author_yaml textarea")
            editor.fill(original.replace("version: 1", "version: 2"))
            editor.press("Control+Enter")
            expect(page.get_by_text("unsaved changes")).to_be_visible()
            page.locator(".st-key-author_save button").click()
            expect(page.get_by_text("Saved the scenario")).to_be_visible()
        finally:
            browser.close()
    assert "version: 2" in path.read_text(encoding="utf-8")
