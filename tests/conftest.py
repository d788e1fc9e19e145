"""Shared fixtures: a valid scenario text, a temporary SQLite store."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cvb_engine.scenario import CANARY
from cvb_engine.store import dispose_engines

REPO = Path(__file__).resolve().parent.parent

VALID_SCENARIO = textwrap.dedent(
    f"""\
    id: http-client-choice
    version: 1
    category: library-choice
    title: Fetch JSON with retries
    canary: {CANARY}
    task: |
      Write a Python function fetch_json(url) that downloads a URL and returns the parsed JSON.
    constraints:
      - id: httpx-not-requests
        text: >-
          The team standardized on httpx after requests caused the March socket-exhaustion incident.
        checks:
          - kind: regex
            forbid: '(?m)^\\s*(import requests|from requests\\b)'
          - kind: regex
            require: '\\bhttpx\\.'
        samples:
          violating:
            - "import requests\\nrequests.get(url)"
            - "from requests import get\\nget(url)"
            - "import requests as r\\nr.get(url)"
          compliant:
            - "import httpx\\nhttpx.get(url)"
            - "import httpx\\nwith httpx.Client() as c:\\n    c.get(url)"
            - "import httpx\\n\\ndef f(u):\\n    return httpx.get(u).json()"
      - id: timeout-set
        text: The gateway team measured that calls without a timeout caused the 2025 stalls.
        checks:
          - kind: regex
            require: 'timeout\\s*='
        samples:
          violating: ["httpx.get(url)", "httpx.get(url, follow_redirects=True)", "c.get(u)"]
          compliant: ["httpx.get(url, timeout=5)", "httpx.Client(timeout=10)", "get(u, timeout = 3)"]
    """
)


@pytest.fixture
def valid_text() -> str:
    return VALID_SCENARIO


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    root = tmp_path / "scenarios" / "library-choice"
    root.mkdir(parents=True)
    (root / "http-client-choice.yaml").write_text(VALID_SCENARIO, encoding="utf-8")
    return tmp_path / "scenarios"


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cvb.db'}"
    yield url
    dispose_engines()
