"""Records from outside are shown as text on the Results page.

A real run against the loopback fake endpoint is stored, then its records are
made hostile the way an endpoint or an imported results file could make them:
replies, reasoning, error messages, finish reasons and the model's name carry
a remote image, a link, raw HTML and a directive. The page must show them
literally, in AppTest (Markdown source) and in a real browser (no request
leaves for a foreign host; no such image or link in the DOM).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    serving_studio,
)
from markdown_support import HOSTILE, assert_inert, shown
from test_results_page import APP, KEY_VAR, TIMEOUT_S, write_scenarios

from cvb_engine.runner import BenchmarkRun, RunOptions
from cvb_engine.store import dispose_engines

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from fake_openai import FakeOpenAI  # noqa: E402

RUN = "results-hostile"
MODEL = "<b>m</b>[x](http://evil.test)&"
REPLY = f"{HOSTILE}\n\n```python\nimport httpx\n\nprint(httpx.get('https://x', timeout=5))\n```\n"
FINISH = "<img src=http://evil.test/f.png>"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A stored run whose cold records are errors and whose others reply ``REPLY``."""
    tmp = tmp_path_factory.mktemp("hostile")
    scenarios = tmp / "scenarios"
    write_scenarios(scenarios)
    db = tmp / "cvb.db"
    os.environ[KEY_VAR] = "sk-results-hostile"
    with FakeOpenAI(models=["m-h"], reply=lambda _request: REPLY) as fake:
        options = RunOptions(
            scenarios=str(scenarios),
            models=["m-h"],
            runs=1,
            base_url=fake.base_url,
            api_key_env=KEY_VAR,
            db=f"sqlite:///{db}",
            run_id=RUN,
            concurrency=4,
            timeout_s=10.0,
            max_attempts=1,
        )
        assert asyncio.run(BenchmarkRun(options).execute()).status == "finished"
    dispose_engines()
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE record SET status = 'error', error = ?, response = NULL, code = NULL, "
            "strict = NULL WHERE arm = 'cold'",
            (HOSTILE,),
        )
        con.execute(
            "UPDATE record SET finish_reason = ?, reasoning = ? WHERE arm = 'mandated'",
            (FINISH, HOSTILE),
        )
        con.execute("UPDATE record SET model = ?", (MODEL,))
    return f"sqlite:///{db}", scenarios


@pytest.fixture
def store(hostile: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    monkeypatch.setenv("CVB_DATABASE_URL", hostile[0])
    monkeypatch.setenv("CVB_SCENARIOS", str(hostile[1]))
    yield hostile
    dispose_engines()


def start(view: str) -> Any:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.switch_page("app_pages/results.py")
    at.session_state["results_runs"] = [RUN]
    at.session_state["results_view"] = view
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def bodies(at: Any) -> list[str]:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("success", "error", "warning", "info"):
        parts += [e.value for e in at.get(kind)]
    return [str(p) for p in parts]


def test_side_by_side_shows_replies_errors_and_finish_reasons_literally(store: Any) -> None:
    at = start("Side by side")
    # Error record: the server's message as code, literally; the alert itself is ours.
    assert any(str(c.value) == HOSTILE for c in at.code), [c.value for c in at.code]
    assert any("The request failed" in str(e.value) for e in at.error)
    # Replies: plain text (st.text) and escaped HTML (the code view), never Markdown.
    assert any(HOSTILE in str(t.value) for t in at.text)
    # Reasoning: code, literally.
    assert any(str(c.value) == HOSTILE for c in at.code)
    # Finish reason and model name: escaped inside captions.
    captions = "\n".join(shown(str(c.value)) for c in at.caption)
    assert f"finish {FINISH}" in captions and MODEL in captions
    assert_inert(bodies(at), MODEL)
    assert_inert(bodies(at), FINISH)
    html = "\n".join(str(h.value) for h in at.html)
    assert "<img" not in html and "<b>" not in html


def test_charts_escape_model_names(store: Any) -> None:
    at = start("Overview")
    specs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    drawn = json.dumps(specs)
    assert "<b>m</b>" not in drawn
    assert "&lt;b&gt;m&lt;/b&gt;[x](http://evil.test)&amp;" in drawn
    assert_inert(bodies(at), MODEL, required=False)


# --------------------------------------------------------------------------- browser


@pytest.fixture
def studio(hostile: tuple[str, Path], tmp_path: Path) -> Iterator[str]:
    require_browser()
    args = ["--scenarios", str(hostile[1])]
    with serving_studio(args, tmp_path / "studio.log", {"CVB_DATABASE_URL": hostile[0]}) as url:
        yield url


def test_no_request_leaves_for_a_foreign_host_in_a_real_browser(studio: str) -> None:
    from playwright.sync_api import expect, sync_playwright

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
            expect(page.get_by_text("The request failed").first).to_be_visible(timeout=45_000)
            for label in ("Full response", "Reasoning"):
                page.get_by_text(label).first.click()
            # Literal text on the page, no live image or link.
            expect(page.get_by_text("![x](http://evil.test/a.png)").first).to_be_visible(
                timeout=45_000
            )
            time.sleep(2)  # give any image or font a chance to be asked for
            assert page.locator('img[src*="evil.test"]').count() == 0
            assert page.locator('a[href*="evil.test"]').count() == 0
            assert page.locator("b", has_text="bold").count() == 0
            page.get_by_role("tab", name="Overview").click()
            page.wait_for_selector(".js-plotly-plot .bars path", state="attached")
            time.sleep(1)
            assert page.locator('.js-plotly-plot a[href*="evil.test"]').count() == 0
        finally:
            browser.close()
    assert foreign == [], foreign
