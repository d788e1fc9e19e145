"""Shared fixtures: a valid scenario text, a temporary SQLite store."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pg_server import PgServer

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


@pytest.fixture(scope="session")
def pg_base_url() -> Iterator[str | None]:
    """A PostgreSQL server for the session, or None when none can be had.

    With CVB_REQUIRE_PG=1 (set by .ci/run) a missing server is an error, not a skip.
    """
    given = os.environ.get("CVB_TEST_PG_URL")
    if given:
        yield given
        return
    server = PgServer()
    try:
        import psycopg  # noqa: F401

        url: str | None = server.start()
    except Exception as exc:
        if os.environ.get("CVB_REQUIRE_PG") == "1":
            raise
        url = None
        print(f"PostgreSQL unavailable, its tests are skipped: {exc}")
    yield url
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store on each backend (one test, two runs)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cvb.db'}"
        dispose_engines()
        return
    base = request.getfixturevalue("pg_base_url")
    if base is None:
        pytest.skip("PostgreSQL is not available here")
    import sqlalchemy

    name = f"cvb_test_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    yield base.rsplit("/", 1)[0] + f"/{name}"
    dispose_engines()
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def run_python(tmp_path: Path) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """Run a script with this interpreter in a child process, in ``tmp_path``.

    A guard against hangs, not a timing: the child is given 60 s for work that
    takes milliseconds, and only a run past that fails (``TimeoutExpired``).
    """

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, timeout=60, capture_output=True, text=True
        )

    return run
