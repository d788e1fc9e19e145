"""A real ``cvb studio`` in a real browser: every page opens from a direct link,
and Streamlit's Deploy button is not in the header."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    serving_studio,
)

UI_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_browser()
    tmp = tmp_path_factory.mktemp("routes")
    env = {
        "CVB_DATABASE_URL": f"sqlite:///{tmp / 'cvb.db'}",
        "CVB_ENDPOINTS": str(tmp / "endpoints.json"),
        "CVB_DRAFTS": str(tmp / "drafts"),
    }
    with serving_studio(["--scenarios", str(tmp)], tmp / "studio.log", env) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "heading", "lands_on"),
    [
        ("/author", "Author", "/author"),
        ("/run", "Run the benchmark", "/run"),
        ("/results", "Results", "/results"),
        ("/", "Author", "/author"),
    ],
    ids=["author", "run", "results", "root"],
)
def test_a_direct_link_opens_its_page(studio: str, path: str, heading: str, lands_on: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page()
            page.goto(studio + path)
            expect(page.locator("h1").first).to_contain_text(heading, timeout=UI_TIMEOUT_MS)
            assert page.get_by_text("Page not found").count() == 0
            assert page.url.rstrip("/").endswith(lands_on), page.url
            assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
        finally:
            browser.close()


def test_the_served_pages_answer_over_http(studio: str) -> None:
    import urllib.request

    for path in ("/author", "/run", "/results"):
        with urllib.request.urlopen(studio + path, timeout=30) as response:
            assert response.status == 200, path
