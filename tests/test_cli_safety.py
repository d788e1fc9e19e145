"""What ``cvb`` writes for people to open, from hostile text.

A real run is stored in SQLite, then its names are replaced the way another
tool, an older cvb or a hostile server could leave them: formula cells, HTML,
escape sequences (window title, OSC 52 clipboard writes), a bidi override. The
CSV export neutralizes every cell, the Markdown report writes them as text, and
no command lets an escape sequence reach the terminal; a run id that breaks
the rule is refused with the flag or field named.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cvb_engine.safe_text import csv_cell

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import VALID_SCENARIO
from fake_openai import FakeOpenAI
from test_dbtools import reply, run

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
BIDI = "\u202e"
IMG = "<img src=x onerror=alert(1)>"
MODEL_A = '=HYPERLINK("http://evil")'
MODEL_B = f"{IMG} | {OSC_TITLE}{BIDI}"
RUN_ID = f"hostile{OSC_CLIPBOARD}"  # not a valid id: left by another tool
# column -> value stored on one record of MODEL_A
CSV_CELLS = {
    "model": MODEL_A,
    "finish_reason": "+1+1",
    "messages_sha256": "@SUM(A1)",
    "category": "\t=1",
    "error": "-2+3",
    "prompt_version": "\r=1",
}
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cvb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", *args], capture_output=True, text=True, timeout=120
    )


@dataclass(frozen=True)
class Hostile:
    db: str
    scenarios: Path
    tmp: Path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "scenarios" / "library-choice").mkdir(parents=True)
    (tmp / "scenarios" / "library-choice" / "http-client-choice.yaml").write_text(VALID_SCENARIO)
    db = tmp / "cvb.db"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        run(tmp / "scenarios", server.base_url, f"sqlite:///{db}", "plain")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE record SET model = ? WHERE model = 'm-a'", (MODEL_A,))
        con.execute("UPDATE record SET model = ? WHERE model = 'm-b'", (MODEL_B,))
        (first,) = con.execute("SELECT min(id) FROM record WHERE model = ?", (MODEL_A,)).fetchone()
        columns = [c for c in CSV_CELLS if c != "model"]
        con.execute(
            f"UPDATE record SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
            (*(CSV_CELLS[c] for c in columns), first),
        )
        con.execute("UPDATE run SET id = ?", (RUN_ID,))
        con.execute("UPDATE record SET run_id = ?", (RUN_ID,))
    return Hostile(f"sqlite:///{db}", tmp / "scenarios", tmp)


def assert_shown_as_text(out: subprocess.CompletedProcess[str]) -> None:
    text = out.stdout + out.stderr
    assert not UNSAFE.search(text), repr(UNSAFE.search(text))
    assert "Traceback" not in text, text


# --------------------------------------------------------------------------- CSV


@pytest.fixture(scope="module")
def csv_rows(hostile: Hostile) -> list[dict[str, str]]:
    path = hostile.tmp / "records.csv"
    made = cvb("report", "--db", hostile.db, "--csv", str(path))  # the latest run
    assert made.returncode == 0, made.stderr
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(("column", "value"), list(CSV_CELLS.items()), ids=list(CSV_CELLS))
def test_csv_export_neutralizes_a_formula_cell(
    csv_rows: list[dict[str, str]], column: str, value: str
) -> None:
    assert csv_cell(value) in [row[column] for row in csv_rows]
    assert csv_cell(value).startswith("'")
    assert value not in [row[column] for row in csv_rows]


def test_no_csv_cell_starts_a_formula_except_numbers(csv_rows: list[dict[str, str]]) -> None:
    assert len(csv_rows) == 12
    for row in csv_rows:
        for column, cell in row.items():
            if cell.startswith(FORMULA_START):
                assert re.fullmatch(r"-\d+(\.\d+)?", cell), (column, cell)


# --------------------------------------------------------------------------- Markdown


def test_markdown_report_writes_outside_names_as_text(hostile: Hostile) -> None:
    path = hostile.tmp / "report.md"
    made = cvb("report", "--db", hostile.db, "--markdown", str(path))
    assert made.returncode == 0, made.stderr
    md = path.read_text(encoding="utf-8")
    assert "<img" not in md and "&lt;img src=x onerror=alert\\(1\\)&gt;" in md
    assert not UNSAFE.search(md) and "\\\\x1b\\]0;pwned\\\\x07\\\\u202e" in md
    assert '\\=HYPERLINK\\("http' not in md  # '=' is not Markdown: kept
    # a bare URL is broken for autolinkers (a zero-width space after its scheme)
    assert '=HYPERLINK\\("http\u200b://evil"\\)' in md and "http://evil" not in md
    # every row of a table has its header's number of cells: no name breaks a table
    for table in re.findall(r"(?:^\|.*\n?)+", md, flags=re.M):
        cells = {len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}
        assert len(cells) == 1, table


# --------------------------------------------------------------------------- terminal


class HostileEndpoint(BaseHTTPRequestHandler):
    """A server whose model ids and error messages carry escape sequences."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if "/fail/" in self.path:
            error = {"message": f"upstream {OSC_CLIPBOARD}{BIDI} down", "type": "server_error"}
            return self._json(500, {"error": error})
        ids = ["m1", f"m2{OSC_TITLE}{BIDI}"]
        self._json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        error = {"message": f"bad key {OSC_TITLE}{BIDI}", "type": "invalid_request_error"}
        self._json(401, {"error": error})


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


RUN = "run --api-key-env= --scenarios {scen} --db {db2} --max-attempts 1 --quiet"
COMMANDS = [
    pytest.param("report --db {db}", True, id="report-to-terminal"),
    pytest.param("db info --db {db}", True, id="db-info"),
    pytest.param("score --db {db} --scenarios {scen}", True, id="score"),
    pytest.param("report {file}", True, id="report-results-file"),
    pytest.param("lint --authoring {lint}", True, id="lint-file-name"),
    pytest.param(
        f"{RUN} --dry-run --base-url {{url}}/ok/v1 --models {{bad}}", True, id="run-dry-run-models"
    ),
    pytest.param(f"{RUN} --base-url {{url}}/fail/v1", True, id="run-catalog-error-reason"),
    pytest.param(f"{RUN} --base-url {{url}}/ok/v1 --models m1", True, id="run-api-error-reason"),
    pytest.param("run --run-id {bad} --dry-run", False, id="run-bad-run-id"),
    pytest.param("demo --run-id {bad}", False, id="demo-bad-run-id"),
]


@pytest.mark.parametrize(("command", "shows_escape"), COMMANDS)
def test_no_escape_sequence_reaches_the_terminal(
    hostile: Hostile, endpoint: str, command: str, shows_escape: bool
) -> None:
    file = hostile.tmp / "results.json"
    if not file.exists():
        made = cvb("report", "--db", hostile.db, "--json", str(file))
        data = json.loads(Path(file).read_text())
        data["run"]["id"] = "from-file"
        file.write_text(json.dumps(data))
        assert made.returncode == 0, made.stderr
    lint = hostile.tmp / "lint"
    lint.mkdir(exist_ok=True)
    (lint / f"bad{OSC_TITLE}{BIDI}.yaml").write_text("id: [\n")
    values = {
        "db": hostile.db,
        "db2": f"sqlite:///{hostile.tmp / 'other.db'}",
        "scen": str(hostile.scenarios),
        "file": str(file),
        "lint": str(lint),
        "url": endpoint,
        "bad": f"x{OSC_TITLE}",
    }
    out = cvb(*(a.format(**values) for a in command.split()))
    assert_shown_as_text(out)
    if shows_escape:  # the hostile text was shown, made visible
        assert "\\x1b" in out.stdout + out.stderr, out.stdout + out.stderr
    else:
        assert out.returncode == 2 and "argument --run-id: a run id is 1–80" in out.stderr


# --------------------------------------------------------------------------- run ids


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(("run", "--run-id", "a b"), "argument --run-id: a run id is", id="run"),
        pytest.param(("run", "--run-id", "ok\n"), "argument --run-id: a run id is", id="newline"),
        pytest.param(("score", "a/b"), "argument run_id: a run id is", id="score-slash"),
        pytest.param(("report", "a b"), "cvb: RUN_ID: a run id is", id="report"),
        pytest.param(
            ("db", "copy", "--from", "sqlite://", "--to", "sqlite://", "--run", "a b"),
            "argument --run: a run id is",
            id="db-copy",
        ),
        pytest.param(("demo", "--run-id", "A" * 81), "argument --run-id: a run id", id="demo"),
    ],
)
def test_a_bad_run_id_is_refused_naming_the_flag(argv: tuple[str, ...], fragment: str) -> None:
    out = cvb(*argv)
    assert out.returncode == 2 and fragment in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_results_file_with_a_bad_run_id_is_refused_naming_the_field(
    hostile: Hostile, tmp_path: Path
) -> None:
    exported = tmp_path / "bad.json"
    made = cvb("report", "--db", hostile.db, "--json", str(exported))  # run.id is RUN_ID
    assert made.returncode == 0, made.stderr
    out = cvb("report", str(exported))
    assert out.returncode == 2 and f"{exported}: run.id: a run id is 1–80" in out.stderr
    assert_shown_as_text(out)


@pytest.mark.parametrize("run_id", ["run-20250101-120000-ab12", "Z" * 80], ids=["default", "80"])
def test_a_valid_run_id_passes_the_cli(scenario_dir: Path, tmp_path: Path, run_id: str) -> None:
    argv = ["run", "--dry-run", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env="]
    argv += ["--models", "m-a", "--scenarios", str(scenario_dir)]
    made = cvb(*argv, "--db", f"sqlite:///{tmp_path / 'ok.db'}", "--run-id", run_id)
    assert made.returncode == 0 and "dry run: nothing was sent" in made.stdout, made.stderr
