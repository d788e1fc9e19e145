"""The Run page in a real browser: ``cvb studio`` driven by Playwright through Debian's chromium.

A fake OpenAI-compatible endpoint runs as a process (``tests/fake_openai.py``);
the test adds it as an endpoint on the page, probes it, launches a run and
waits for the live panel — which refreshes by itself — to show it finished.

Setup: ``scripts/setup.sh`` installs ``chromium`` and
``playwright`` (no browser download); without them the test is skipped.
Screenshots go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, STARTUP_S, free_port, require_browser, stop

from cvb_engine import score_code
from cvb_engine.arms import build_messages
from cvb_engine.scenario import load_library

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
KEY_VAR = "CVB_TEST_BROWSER_KEY"
KEY = "sk-browser-LeakCanary-91d0c7"
MODELS = "llama-3.1-8b-instant,openai/gpt-oss-20b,some-other-model"
SCENARIOS = {"http-client-choice": "library-choice", "shell-command-runner": "security"}
UI_TIMEOUT_MS = 30_000


def replies(scenarios: Path) -> dict[str, str]:
    """Substring → reply for the fake server: each scenario's orders (mandated) get a
    compliant answer, its project memory (incentivized) one only for the first
    scenario, and the bare task (cold) a violating one. Order matters: the task text
    is in every arm's message, so it comes last."""
    table: dict[str, str] = {}
    cold: dict[str, str] = {}
    for i, (_sid, item) in enumerate(sorted(load_library(scenarios).items())):
        sc = item.scenario
        samples = [s for c in sc.constraints for s in c.samples.compliant]
        good = next(s for s in samples if score_code(sc, s).strict)
        bad = sc.constraints[0].samples.violating[0]
        mandated = build_messages(sc, "mandated")[1]["content"]
        memory = build_messages(sc, "incentivized")[1]["content"]
        table[mandated[mandated.index("Requirements.") :]] = f"```python\n{good}\n```"
        table[memory[: memory.index("\n---\n")]] = f"```python\n{good if i == 0 else bad}\n```"
        cold[sc.task.strip()] = f"```python\n{bad}\n```"
    return {**table, **cold}


@pytest.fixture
def library(tmp_path: Path) -> Path:
    for sid, category in SCENARIOS.items():
        (tmp_path / "scenarios" / category).mkdir(parents=True)
        shutil.copy(
            REPO / "scenarios" / category / f"{sid}.yaml",
            tmp_path / "scenarios" / category / f"{sid}.yaml",
        )
    return tmp_path / "scenarios"


@pytest.fixture
def fake_endpoint(tmp_path: Path, library: Path) -> Iterator[str]:
    table = tmp_path / "replies.json"
    table.write_text(json.dumps(replies(library)), encoding="utf-8")
    proc = subprocess.Popen(
        [
            *(sys.executable, str(REPO / "tests" / "fake_openai.py"), "--port", "0"),
            *("--models", MODELS, "--delay", "0.5", "--replies", str(table)),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        yield line.split()[1]
    finally:
        stop(proc)


@pytest.fixture
def studio(tmp_path: Path, library: Path) -> Iterator[str]:
    """``cvb studio`` on a free port over the temporary library, store and endpoint file."""
    require_browser()
    port = free_port()
    cvb = shutil.which("cvb")
    command = [cvb] if cvb else [sys.executable, "-m", "cvb_engine.cli"]
    command += ["studio", "--port", str(port), "--scenarios", str(library)]
    command += ["--db", f"sqlite:///{tmp_path / 'cvb.db'}"]
    env = {
        **os.environ,
        KEY_VAR: KEY,
        "CVB_ENDPOINTS": str(tmp_path / "endpoints.json"),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.pop("CVB_LOGS", None)
    log = tmp_path / "studio.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"cvb studio exited with {proc.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"cvb studio did not answer within {STARTUP_S} s:\n{log.read_text()}")
            time.sleep(0.3)
        yield url
    finally:
        stop(proc)


def settle(page: Page) -> None:
    """Wait until the script has finished its rerun (no element left from the previous one)."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-stale=\"true\"]')"
    )


def button(page: Page, key: str) -> Locator:
    # Streamlit also draws a hidden copy of a full-width button (to measure it): the
    # first one is the real one.
    return page.locator(f".st-key-{key} button").first


def test_launch_from_the_page_and_watch_it_finish(
    studio: str, fake_endpoint: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=UI_TIMEOUT_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            # Tall enough for the whole page: Streamlit scrolls inside its main area, so a
            # full-page screenshot is only as tall as the window.
            page = browser.new_page(viewport={"width": 1400, "height": 2600})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(f"{studio}/run")
            expect(page.get_by_text("Run the benchmark")).to_be_visible()
            expect(page.get_by_text("No runs yet")).to_be_visible()

            # Add the endpoint: its URL and the NAME of the key variable.
            page.get_by_text("Add, edit or remove endpoints").click()
            for key, value in (
                ("run_ep_name", "fake"),
                ("run_ep_url", fake_endpoint),
                ("run_ep_key_env", KEY_VAR),
            ):
                field = page.locator(f".st-key-{key} input")
                field.fill(value)
                field.press("Enter")
                expect(field).to_have_value(value)
            settle(page)
            button(page, "run_ep_save").click()
            expect(page.get_by_text("Saved endpoint")).to_be_visible()
            expect(page.get_by_text(f"Key variable {KEY_VAR} is set")).to_be_visible()
            page.get_by_text("Add, edit or remove endpoints").click()  # fold it again
            settle(page)

            # Probe: two of the default models are offered and chosen.
            button(page, "run_probe_button").click()
            expect(page.get_by_text("Default models available: 2 of 5")).to_be_visible()
            settle(page)  # the rerun that chose the models must end before the next input
            models = page.locator(".st-key-run_models")
            expect(models).to_contain_text("llama-3.1-8b-instant")
            expect(models).to_contain_text("openai/gpt-oss-20b")

            # The dry run shows the matrix before anything is sent; then launch.
            concurrency = page.locator(".st-key-run_concurrency input")
            concurrency.fill("3")
            concurrency.press("Enter")
            expect(concurrency).to_have_value("3")
            settle(page)
            launch = button(page, "run_launch")
            expect(launch).to_contain_text("Launch 36 calls")
            expect(
                page.get_by_text("2 scenarios × 3 arms × 3 repetitions × 2 models = 36 calls")
            ).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "run-setup.png"), full_page=True)
            launch.click()
            expect(page.get_by_text("Started run")).to_be_visible()

            # The live panel refreshes by itself: no click, no reload.
            card = page.locator('[class*="st-key-run_card_"]').first
            badge = card.locator(".stMarkdownBadge")
            expect(badge).to_contain_text("running", timeout=60_000)
            expect(card.locator('[data-testid="stMetricValue"]').first).not_to_have_text(
                "0 / 36", timeout=60_000
            )
            card.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "run-live-running.png"), full_page=True)
            expect(card.get_by_text("36 / 36 cells (100%)")).to_be_visible(timeout=90_000)
            expect(badge).to_contain_text("finished")
            expect(card.get_by_text("Strict accuracy so far")).to_be_visible()
            expect(card.get_by_text("100% (6/6)").first).to_be_visible()
            time.sleep(0.5)
            page.screenshot(path=str(ARTIFACTS / "run-live-finished.png"), full_page=True)

            # A reload shows the same run from the store.
            page.reload()
            expect(page.get_by_text("36 / 36 cells (100%)")).to_be_visible()
        finally:
            browser.close()
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            assert KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
