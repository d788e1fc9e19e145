"""The runner (README: Running the full benchmark against a hosted endpoint) against the loopback OpenAI-compatible fake server.

Nothing is mocked: the real ``openai`` client inside the runner talks HTTP to
``tests/fake_openai.py`` on 127.0.0.1, in-process (a thread) or as a process.
Subprocess ``cvb`` calls cost about two seconds each (imports), so they are
kept to the checks that need a real process: exit codes and stderr, kill -9,
and what a run leaves on disk.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import sqlalchemy.exc
from sqlalchemy.pool import NullPool
from sqlmodel import Session

from cvb_engine import cli, runner
from cvb_engine.arms import build_messages
from cvb_engine.metrics import summarize
from cvb_engine.prompts import messages_sha256
from cvb_engine.results import db_tallies
from cvb_engine.run_options import DEFAULT_OPTIONS
from cvb_engine.runner import BenchmarkRun, RunOptions, print_dry_run
from cvb_engine.scenario import ARMS, CVB_CATEGORIES, load_library
from cvb_engine.store import dispose_engines, get_engine

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fake_openai import CHAT_PATH, FakeOpenAI, FaultPlan  # noqa: E402
from fake_openai import messages_sha256 as served_sha256  # noqa: E402
from proc_scan import alive, children_with  # noqa: E402

RECORDER = "cvb_engine.recorder"  # the runner's recorder process, by its command line

FAKE_SCRIPT = TESTS / "fake_openai.py"
KEY_VAR = "CVB_TEST_RUNNER_KEY"
KEY = "sk-cvbtest-Zq7LeakCanary-3f9e1d0b7a"  # distinctive: grep-able in any byte dump
SEED = DEFAULT_OPTIONS.seed

COMPLIANT = (
    "```python\nimport httpx\n\n\ndef fetch_json(url):\n"
    "    return httpx.get(url, timeout=5).json()\n```"
)
PARTIAL = "```python\nimport httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url).json()\n```"
VIOLATING = (
    "```python\nimport requests\n\n\ndef fetch_json(url):\n    return requests.get(url).json()\n```"
)

Cell = tuple[str, str, str, int]
Reply = Callable[[dict[str, Any]], str | dict[str, Any]]


# --------------------------------------------------------------------------- helpers


def write_scenarios(
    root: Path, valid_text: str, per_category: int, categories: Sequence[str] = CVB_CATEGORIES
) -> list[str]:
    """Copies of the valid scenario, renamed into each category (id = file name)."""
    ids = []
    for cat in categories:
        for i in range(1, per_category + 1):
            sid = f"{cat}-{i}"
            text = (
                valid_text.replace("id: http-client-choice", f"id: {sid}", 1)
                .replace("category: library-choice", f"category: {cat}", 1)
                .replace("returns the parsed JSON.", f"returns the parsed JSON (ticket {sid}).", 1)
            )
            (root / cat).mkdir(parents=True, exist_ok=True)
            (root / cat / f"{sid}.yaml").write_text(text, encoding="utf-8")
            ids.append(sid)
    return sorted(ids)


def prompt_index(scenarios: Path) -> dict[str, tuple[str, str]]:
    """messages sha256 → (scenario id, arm), built with the engine's own prompt builder."""
    library = load_library(scenarios)
    return {
        messages_sha256(build_messages(item.scenario, arm)): (sid, arm)
        for sid, item in library.items()
        for arm in ARMS
    }


def cell_of(request: dict[str, Any], index: dict[str, tuple[str, str]]) -> Cell:
    sid, arm = index[served_sha256(request["messages"])]
    return request["model"], sid, arm, int(request.get("seed", SEED)) - SEED


def arm_policy(index: dict[str, tuple[str, str]], good: set[str]) -> Reply:
    """cold violates both constraints, mandated honors both; incentivized honors both
    for m-a, and for m-b only on the scenarios in ``good`` (elsewhere it forgets the timeout)."""

    def reply(request: dict[str, Any]) -> str:
        model, sid, arm, _ = cell_of(request, index)
        if arm == "cold":
            return VIOLATING
        if arm == "mandated" or model == "m-a" or sid in good:
            return COMPLIANT
        return PARTIAL

    return reply


def matrix_cells(models: Sequence[str], sids: Sequence[str], runs: int) -> set[Cell]:
    return {(m, s, a, r) for m in models for s in sids for a in ARMS for r in range(runs)}


def db_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def query(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Read any store with a connection of its own (no pool: nothing stays open),
    also while another process writes."""
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sqlalchemy.text(sql), params)]
    finally:
        engine.dispose()


def records(url: str, run_id: str) -> list[dict[str, Any]]:
    cols = ["id", "model", "scenario_id", "arm", "rep", "status", "error", "strict", "attempts"]
    cols += ["created", "messages_sha256", "n_constraints", "response"]
    rows = query(url, f"SELECT {', '.join(cols)} FROM record WHERE run_id = :r", r=run_id)
    return [dict(zip(cols, row, strict=True)) for row in rows]


def cells(recs: list[dict[str, Any]]) -> list[Cell]:
    return [(r["model"], r["scenario_id"], r["arm"], r["rep"]) for r in recs]


def assert_exactly(recs: list[dict[str, Any]], expected: set[Cell]) -> None:
    got = cells(recs)
    dupes = [c for c, n in Counter(got).items() if n > 1]
    assert not dupes, f"cells stored twice: {dupes[:5]}"
    assert set(got) == expected, (
        f"holes: {sorted(expected - set(got))[:5]}, extra: {sorted(set(got) - expected)[:5]}"
    )


def run_status(url: str, run_id: str) -> str:
    return str(query(url, "SELECT status FROM run WHERE id = :r", r=run_id)[0][0])


def chat_log(server: FakeOpenAI) -> list[Any]:
    return [e for e in server.log if e.path == CHAT_PATH]


def options(base_url: str, scenarios: Path, db: str, **over: Any) -> RunOptions:
    base: dict[str, Any] = {
        "scenarios": str(scenarios),
        "models": ["m-a"],
        "runs": 1,
        "base_url": base_url,
        "api_key_env": KEY_VAR,
        "db": db,
        "run_id": "r1",
        "concurrency": 6,
        "timeout_s": 10.0,
    }
    base.update(over)
    return RunOptions(**base)


def execute(opts: RunOptions) -> runner.RunOutcome:
    return asyncio.run(BenchmarkRun(opts).execute())


def cli_args(base_url: str, scenarios: Path, db: str, *extra: str) -> list[str]:
    return [
        "--scenarios",
        str(scenarios),
        "--base-url",
        base_url,
        "--api-key-env",
        KEY_VAR,
        "--db",
        db,
        *extra,
    ]


def cvb_command() -> list[str]:
    exe = shutil.which("cvb")
    main = "import sys; from cvb_engine.cli import main; sys.exit(main())"
    return [exe] if exe else [sys.executable, "-c", main]


def child_env(tmp: Path, key: str | None = KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (KEY_VAR, "CVB_DATABASE_URL")}
    env.update(CVB_ENDPOINTS=str(tmp / "no-endpoints.json"), NO_PROXY="127.0.0.1,localhost")
    env["no_proxy"] = env["NO_PROXY"]
    if key is not None:
        env[KEY_VAR] = key
    return env


def cvb(
    args: Sequence[str], tmp: Path, *, key: str | None = KEY, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cvb_command(), *args],
        cwd=tmp,
        env=child_env(tmp, key),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    # progress lines may come first; the message is the last line, as `cvb: ...`
    message = proc.stderr.rstrip("\n").splitlines()[-1]
    assert message.startswith("cvb: "), proc.stderr
    for needle in needles:
        assert needle in message, (needle, proc.stderr)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CVB_ENDPOINTS", str(tmp_path / "no-endpoints.json"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("CVB_DATABASE_URL", raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite store, for tests of HTTP behaviour (``db_url`` runs on every backend, and
    is used where the store's own logic is under test: binding, resume, replacement)."""
    yield f"sqlite:///{tmp_path / 'cvb.db'}"
    dispose_engines()


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["m-a", "m-b"], reply=lambda _r: COMPLIANT) as fake:
        yield fake


# --------------------------------------------------------------------------- dry run


def test_dry_run_prints_the_945_call_matrix_and_sends_nothing(
    tmp_path: Path, valid_text: str, server: FakeOpenAI
) -> None:
    scenarios = tmp_path / "scenarios"
    assert len(write_scenarios(scenarios, valid_text, per_category=5)) == 35
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    args = ["run", "--dry-run", "--models", "a,b,c", "--runs", "3"]
    proc = cvb([*args, *cli_args(server.base_url, scenarios, db)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "35 scenarios × 3 arms × 3 runs × 3 models = 945 calls" in out
    assert "a, b, c" in out
    assert "cold, mandated, incentivized" in out
    for cat in CVB_CATEGORIES:
        assert f"{cat} 5" in out
    assert "nothing was sent" in out
    assert server.log == []


@pytest.mark.parametrize(
    ("over", "calls", "models_note"),
    [
        ({"models": ["a", "b", "c"], "runs": 3}, 945, "given"),
        ({"models": None, "runs": 3}, 945, "not probed"),  # the default three, no /models call
        ({"models": ["a"], "runs": 2, "arms": ["cold", "mandated"]}, 140, "given"),
    ],
)
def test_dry_run_variants(
    tmp_path: Path,
    valid_text: str,
    server: FakeOpenAI,
    over: dict[str, Any],
    calls: int,
    models_note: str,
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=5)
    buf = io.StringIO()
    opts = options(server.base_url, scenarios, f"sqlite:///{tmp_path / 'cvb.db'}", **over)
    opts = opts.changed(run_id=None)
    assert print_dry_run(BenchmarkRun(opts), out=buf) == 0
    text = buf.getvalue()
    assert f"= {calls} calls" in text, text
    assert models_note in text
    assert server.log == []


@pytest.mark.parametrize(
    ("key_env", "value", "line"),
    [
        (KEY_VAR, None, f"{KEY_VAR} is not set: the real run will refuse; export it first"),
        (KEY_VAR, KEY, f"from {KEY_VAR}"),
        ("", None, "none needed"),
    ],
    ids=["unset", "set", "no-key-endpoint"],
)
def test_dry_run_says_whether_the_key_is_set(
    tmp_path: Path,
    valid_text: str,
    monkeypatch: pytest.MonkeyPatch,
    key_env: str,
    value: str | None,
    line: str,
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1)
    if value is None:
        monkeypatch.delenv(KEY_VAR)
    opts = options("http://127.0.0.1:9/v1", scenarios, f"sqlite:///{tmp_path / 'cvb.db'}")
    opts = opts.changed(api_key_env=key_env, run_id=None)
    buf = io.StringIO()
    assert print_dry_run(BenchmarkRun(opts), out=buf) == 0
    assert f"key        {line}" in buf.getvalue().splitlines()
    assert KEY not in buf.getvalue()


@pytest.mark.parametrize("tty", [False, True], ids=["plain", "tty"])
def test_the_last_progress_line_is_printed_once(tty: bool) -> None:
    buf = io.StringIO()
    show = runner.TerminalProgress(buf, tty=tty)
    p = runner.Progress(total=3)
    for _ in range(3):
        p.ok += 1
        show(p)
        time.sleep(0.11 if tty else 0)  # past the bar's redraw interval
    show(p, final=True)
    text = buf.getvalue()
    finals = text.count("3/3")
    assert finals == 1, text
    assert text.endswith("\n")


def test_a_resume_with_nothing_to_send_says_the_run_is_complete(
    tmp_path: Path, valid_text: str, server: FakeOpenAI
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=CVB_CATEGORIES[:1])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    args = ["run", "--models", "m-a", "--runs", "1", "--arms", "cold", "--run-id", "again"]
    first = cvb([*args, *cli_args(server.base_url, scenarios, db)], tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("progress 1/1 (100%)") == 1, first.stderr  # not twice
    again = cvb([*args, *cli_args(server.base_url, scenarios, db)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "nothing to send: run again is complete" in again.stdout
    assert "progress 0/0" not in again.stderr


# --------------------------------------------------------------------------- full run


GOOD_FOR_B = {"concurrency-1", "encoding-io-1", "error-handling-1"}  # 3 of the 7 scenarios


def test_full_run_in_process_stores_the_matrix_and_reports_by_arm(
    tmp_path: Path,
    valid_text: str,
    db_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=1)
    index = prompt_index(scenarios)
    with FakeOpenAI(models=["m-a", "m-b"], reply=arm_policy(index, GOOD_FOR_B)) as fake:
        outcome = execute(
            options(fake.base_url, scenarios, db_url, models=["m-a", "m-b"], runs=2, run_id="full")
        )
        served = chat_log(fake)
    assert outcome.status == "finished"
    assert (outcome.progress.ok, outcome.progress.errors) == (84, 0)
    assert outcome.matrix.size == 84 == len(served)

    recs = records(db_url, "full")
    assert_exactly(recs, matrix_cells(["m-a", "m-b"], sids, 2))
    assert all(r["status"] == "ok" and r["strict"] is not None for r in recs)
    assert all(r["n_constraints"] == 2 for r in recs)
    # provenance: the stored messages hash is the hash of what the server received
    assert {r["messages_sha256"] for r in recs} == {e.messages_sha256 for e in served}
    assert run_status(db_url, "full") == "finished"

    with Session(get_engine(db_url)) as session:
        summary = summarize(*db_tallies(session, ["full"]))
    expected_strict = {
        ("m-a", "cold"): (0, 14),
        ("m-a", "mandated"): (14, 14),
        ("m-a", "incentivized"): (14, 14),
        ("m-b", "cold"): (0, 14),
        ("m-b", "mandated"): (14, 14),
        ("m-b", "incentivized"): (6, 14),
    }
    assert {k: (r.k, r.n) for k, r in summary.strict.items()} == expected_strict
    b_inc = summary.constraint[("m-b", "incentivized")]
    assert (b_inc.k, b_inc.n) == (20, 28)  # 3 scenarios x 2 + 4 x 1 honored, per rep
    assert summary.gap["m-a"].value == pytest.approx(0.0)
    assert summary.gap["m-b"].value == pytest.approx(1 - 6 / 14)

    assert cli.main(["report", "full", "--db", db_url]) == 0
    md = capsys.readouterr().out
    assert "| m-a | 0.000 | 1.000 | 1.000 | 0.000 [0.000, 0.000] |" in md
    assert "| m-b | 0.000 | 1.000 | 0.429 | +0.571 [" in md
    assert "| m-b | 0.000 | 1.000 | 0.714 |" in md  # per-constraint
    assert "| m-b | 14 / 0 | 14 / 0 | 14 / 0 |" in md

    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    argv = ["report", "full", "--db", db_url, "--json", str(out_json), "--csv", str(out_csv)]
    assert cli.main(argv) == 0
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["format"] == "cvb-results/2" and data["run"]["id"] == "full"
    assert len(data["records"]) == 84
    assert out_csv.read_text(encoding="utf-8").count("\n") == 85  # header + one row per cell
    # the results file reads back to the same numbers
    assert cli.main(["report", str(out_json)]) == 0
    assert "| m-b | 0.000 | 1.000 | 0.429 | +0.571 [" in capsys.readouterr().out


@dataclass
class CliRun:
    tmp: Path
    db: str
    sids: list[str]
    run: subprocess.CompletedProcess[str]
    report_md: subprocess.CompletedProcess[str]
    report_files: subprocess.CompletedProcess[str]
    served: list[Any]


FAIL_CELL: Cell = ("m-a", "security-1", "mandated", 0)
_CLI_RUN: dict[str, CliRun] = {}


@pytest.fixture
def cli_run(valid_text: str, tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    """One ``cvb run`` subprocess (84 cells, one of them failing for good) plus reports,
    shared by the tests that read what it left behind."""
    if "run" in _CLI_RUN:
        return _CLI_RUN["run"]
    tmp = tmp_path_factory.mktemp("cli-run")
    scenarios = tmp / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=1)
    index = prompt_index(scenarios)
    policy = arm_policy(index, GOOD_FOR_B)

    def reply(request: dict[str, Any]) -> str | dict[str, Any]:
        if cell_of(request, index) == FAIL_CELL:
            # an endpoint that echoes the key in its error message: the runner must scrub it
            raise RuntimeError(f"this cell always fails (key {KEY})")
        return policy(request)

    db = f"sqlite:///{tmp / 'cvb.db'}"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply, api_key=KEY) as fake:
        args = ["run", "--models", "m-a,m-b", "--runs", "2", "--run-id", "cli", "--concurrency"]
        args += ["4", "--max-attempts", "2", "--json", str(tmp / "run.json")]
        run = cvb([*args, *cli_args(fake.base_url, scenarios, db)], tmp)
        served = chat_log(fake)
    reports = [
        subprocess.Popen(
            [*cvb_command(), "report", "cli", "--db", db, *extra],
            cwd=tmp,
            env=child_env(tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for extra in ([], ["--json", str(tmp / "r.json"), "--csv", str(tmp / "r.csv")])
    ]
    done = []
    for p in reports:
        out, err = p.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    _CLI_RUN["run"] = CliRun(tmp, db, sids, run, done[0], done[1], served)
    return _CLI_RUN["run"]


def test_cli_run_stores_the_matrix_and_reports_exclude_errors(cli_run: CliRun) -> None:
    run = cli_run.run
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "run cli: finished; sent 84 (83 ok, 1 errors)" in run.stdout
    assert "cvb run --retry-errors --run-id cli" in run.stdout

    recs = records(cli_run.db, "cli")
    assert_exactly(recs, matrix_cells(["m-a", "m-b"], cli_run.sids, 2))
    by_cell = dict(zip(cells(recs), recs, strict=True))
    err = by_cell[FAIL_CELL]
    assert err["status"] == "error" and err["strict"] is None
    assert "HTTP 500" in err["error"] and "after 2 attempts" in err["error"]
    assert "this cell always fails (key ***)" in err["error"]  # the echoed key, scrubbed
    assert err["attempts"] == 2
    assert all(r["strict"] is not None for c, r in by_cell.items() if c != FAIL_CELL)

    md = cli_run.report_md
    assert md.returncode == 0, md.stderr
    # the failing mandated cell is not a violation: m-a mandated is 13/13, not 13/14
    assert "| m-a | 0.000 | 1.000 | 1.000 | 0.000 [0.000, 0.000] |" in md.stdout
    assert "| m-a | 14 / 0 | 13 / 1 | 14 / 0 |" in md.stdout
    assert "| m-b | 0.000 | 1.000 | 0.429 | +0.571 [" in md.stdout

    files = cli_run.report_files
    assert files.returncode == 0, files.stderr
    for name in ("run.json", "r.json"):
        data = json.loads((cli_run.tmp / name).read_text(encoding="utf-8"))
        assert len(data["records"]) == 84
        errors = [r for r in data["records"] if r["status"] == "error"]
        assert len(errors) == 1 and errors[0]["strict"] is None
        assert errors[0]["constraints"] is None
    with (cli_run.tmp / "r.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 84
    assert [
        (r["model"], r["scenario_id"], r["arm"], r["rep"]) for r in rows if r["status"] == "error"
    ] == [(FAIL_CELL[0], FAIL_CELL[1], FAIL_CELL[2], str(FAIL_CELL[3]))]
    assert {r["strict"] for r in rows if r["status"] == "ok"} <= {"True", "False"}


def test_api_key_appears_in_no_file_and_no_output(cli_run: CliRun) -> None:
    assert cli_run.run.returncode == 0
    secret = KEY.encode()
    db_files = sorted(db_path(cli_run.db).parent.glob("cvb.db*"))
    assert db_files
    for path in [*db_files, cli_run.tmp / "run.json", cli_run.tmp / "r.json"]:
        assert secret not in path.read_bytes(), path
    assert secret not in (cli_run.tmp / "r.csv").read_bytes()
    for proc in (cli_run.run, cli_run.report_md, cli_run.report_files):
        assert KEY not in proc.stdout and KEY not in proc.stderr
    # the variable's *name* is kept, so a resume knows where to look
    assert KEY_VAR in json.loads((cli_run.tmp / "r.json").read_text())["run"]["params"].values()


PROGRESS_LINE = re.compile(
    r"^progress (\d+)/(\d+) \((\d+)%\) ok=(\d+) errors=(\d+) rate=\d+\.\d+/s "
    r"eta=(\d\d:\d\d|\d+:\d\d:\d\d|--:--)$"
)


def test_progress_is_plain_lines_when_not_a_terminal(cli_run: CliRun) -> None:
    err = cli_run.run.stderr
    assert "\r" not in err and "█" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "no progress output"
    parsed = []
    for line in lines:
        m = PROGRESS_LINE.match(line)
        assert m, f"not a plain progress line: {line!r}"
        parsed.append(tuple(int(g) for g in m.groups()[:5]))
    done, total, pct, ok, errors = parsed[-1]
    assert (done, total, pct, ok, errors) == (84, 84, 100, 83, 1)
    assert all(d == o + e for d, _, _, o, e in parsed)
    assert [p[0] for p in parsed] == sorted(p[0] for p in parsed)
    assert len(parsed) <= 20  # periodic, not one line per call


def test_terminal_progress_plain_mode_in_process() -> None:
    buf = io.StringIO()
    show = runner.TerminalProgress(buf)  # StringIO is not a TTY
    p = runner.Progress(total=200)
    for i in range(200):
        if i % 50 == 49:
            p.errors += 1
        else:
            p.ok += 1
        show(p)
    show(p, final=True)
    lines = buf.getvalue().splitlines()
    assert all(PROGRESS_LINE.match(line) for line in lines), lines
    assert 10 <= len(lines) <= 13
    assert lines[-1].startswith("progress 200/200 (100%) ok=196 errors=4 ")


# --------------------------------------------------------------------------- kill -9, resume


@contextmanager
def fake_process(tmp: Path, *args: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SCRIPT), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), (line, proc.stderr.read() if proc.stderr else "")
        yield line.split()[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def launch_and_kill(
    tmp: Path,
    argv: list[str],
    db: str,
    run_id: str,
    kill_at: int,
    before_kill: Callable[[int], object] | None = None,
) -> list[dict[str, Any]]:
    """Start ``cvb run``, SIGKILL it once ``kill_at`` records are committed; return them.

    ``before_kill`` is called with the run's pid just before the kill."""
    proc = subprocess.Popen(
        [*cvb_command(), *argv],
        cwd=tmp,
        env=child_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            stored = 0
            if db_path(db).exists():  # do not create it before the runner does
                with suppress(sqlalchemy.exc.OperationalError):  # no table yet
                    sql = "SELECT count(*) FROM record WHERE run_id = :r"
                    stored = query(db, sql, r=run_id)[0][0]
            if stored >= kill_at:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        if before_kill is not None:
            before_kill(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()  # our own child, by its pid (also when an assertion failed above)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    return records(db, run_id)


def served_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_kill_9_then_resume_sends_only_the_missing_cells(tmp_path: Path, valid_text: str) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, per_category=1)
    models, runs, concurrency = ["m-a", "m-b"], 3, 4
    size = len(models) * len(sids) * len(ARMS) * runs  # 126
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    log = tmp_path / "served.jsonl"
    with fake_process(tmp_path, "--models", "m-a,m-b", "--delay", "0.05", "--log", str(log)) as url:
        argv = ["run", "--models", ",".join(models), "--runs", str(runs), "--run-id", "k9"]
        argv += ["--concurrency", str(concurrency), *cli_args(url, scenarios, db)]
        before = {cells([r])[0]: r for r in launch_and_kill(tmp_path, argv, db, "k9", 12)}
        assert 12 <= len(before) < size
        assert all(r["status"] == "ok" for r in before.values())
        assert run_status(db, "k9") == "running"  # partial: nobody marked it finished

        t_resume = time.time()
        second = cvb(argv, tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"{len(before)} already done, matrix {size}" in second.stdout
    after = records(db, "k9")
    assert_exactly(after, matrix_cells(models, sids, runs))
    assert all(r["status"] == "ok" and r["strict"] is not None for r in after)
    assert run_status(db, "k9") == "finished"
    by_cell = {cells([r])[0]: r for r in after}
    for cell, old in before.items():  # what was stored before the kill was left alone
        assert (by_cell[cell]["id"], by_cell[cell]["created"]) == (old["id"], old["created"])

    chats = [e for e in served_log(log) if e["path"] == CHAT_PATH and e["outcome"] == "ok"]
    phase2 = Counter((e["model"], e["messages_sha256"]) for e in chats if e["t"] >= t_resume)
    stored_before = Counter((c[0], r["messages_sha256"]) for c, r in before.items())
    # per (model, messages): the resume asked exactly for the repetitions not yet stored
    expected = {
        (r["model"], r["messages_sha256"]): runs - stored_before[(r["model"], r["messages_sha256"])]
        for r in after
    }
    assert dict(phase2) == {k: v for k, v in expected.items() if v}
    assert sum(phase2.values()) == size - len(before)
    # overall: at most `concurrency` requests were answered but lost with the killed process
    lost = len(chats) - size
    assert lost <= concurrency, f"{lost} answered requests lost to kill -9, > {concurrency}"


def test_kill_9_loses_at_most_the_requests_in_flight_when_scoring_is_slow(
    tmp_path: Path, valid_text: str
) -> None:
    """runner.py promises that "a kill -9 loses at most the requests in flight" (README: Running the full benchmark against a hosted endpoint:
    every finished request is committed at once). Checks that take time (an ``exec`` check
    runs in the sandbox, as IVR hidden tests do) must not hold up commits: the recorder
    commits and acknowledges an answer before it is scored. Answered but uncommitted
    requests are paid for again on resume: count them (answers served before the kill
    minus records)."""
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1, ["library-choice", "security"])
    timeout_check = "        require: 'timeout\\s*='\n"
    for path in scenarios.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        assert timeout_check in text
        exec_check = '      - kind: exec\n        test: "assert True"\n'
        path.write_text(text.replace(timeout_check, timeout_check + exec_check), encoding="utf-8")
    concurrency = 4
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    log = tmp_path / "served.jsonl"
    with fake_process(tmp_path, "--models", "m-a,m-b", "--delay", "0.05", "--log", str(log)) as url:
        argv = ["run", "--models", "m-a,m-b", "--runs", "3", "--run-id", "k9"]
        argv += ["--concurrency", str(concurrency), *cli_args(url, scenarios, db)]
        stored = launch_and_kill(tmp_path, argv, db, "k9", 3)
    answered = [e for e in served_log(log) if e["path"] == CHAT_PATH and e["outcome"] == "ok"]
    lost = len(answered) - len(stored)
    assert 0 <= lost <= concurrency, (
        f"kill -9 lost {lost} answered requests (served {len(answered)}, committed "
        f"{len(stored)}), more than the {concurrency} that can be in flight"
    )


def test_kill_9_of_the_run_leaves_no_recorder_and_no_half_written_store(
    tmp_path: Path, valid_text: str
) -> None:
    """The recorder process ends with the run (it sees its pipe close) once it has scored
    what it committed, and that is whole: every answer has all its constraint and check rows.
    The resume scores what the kill left unscored and completes the matrix."""
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, 1, ["library-choice", "security"])
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    recorders: list[int] = []
    environ: list[bytes] = []

    def look(pid: int) -> None:
        recorders.extend(children_with(pid, RECORDER))
        environ.extend(Path(f"/proc/{r}/environ").read_bytes() for r in recorders)

    with fake_process(tmp_path, "--models", "m-a,m-b", "--delay", "0.02") as url:
        argv = ["run", "--models", "m-a,m-b", "--runs", "4", "--run-id", "k9r"]
        argv += ["--concurrency", "4", *cli_args(url, scenarios, db)]
        launch_and_kill(tmp_path, argv, db, "k9r", 10, before_kill=look)
        assert len(recorders) == 1, recorders
        assert KEY.encode() not in environ[0]  # it stores answers; it needs no key
        assert not alive(recorders[0], wait_s=10), "the recorder outlived the run it recorded"
        assert query(db, "PRAGMA integrity_check") == [("ok",)]
        incomplete = query(
            db,
            "SELECT r.id FROM record r WHERE r.scored_at IS NOT NULL AND r.n_constraints != "
            "(SELECT count(*) FROM constraintresult c WHERE c.record_id = r.id)",
        )
        assert incomplete == []
        # Before it went, it scored what it had committed: another runner of the run
        # would otherwise find answers without a score until somebody resumed.
        assert query(db, "SELECT id FROM record WHERE status = 'ok' AND scored_at IS NULL") == []
        second = cvb(argv, tmp_path)
    assert second.returncode == 0, second.stderr
    after = records(db, "k9r")
    assert_exactly(after, matrix_cells(["m-a", "m-b"], sids, 4))
    assert all(r["status"] == "ok" and r["strict"] is not None for r in after)
    assert not children_with(os.getpid(), RECORDER)


def test_ctrl_c_cancels_the_run_and_the_recorder_stores_and_scores_everything_sent(
    tmp_path: Path, valid_text: str
) -> None:
    """A Ctrl-C signals the terminal's whole process group; the recorder (in a session
    of its own) is then stopped by the runner, in order — even if it is still starting."""
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1)
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    with fake_process(tmp_path, "--models", "m-a", "--delay", "0.05") as url:
        argv = ["run", "--models", "m-a", "--runs", "3", "--run-id", "c", "--concurrency", "2"]
        proc = subprocess.Popen(
            [*cvb_command(), *argv, *cli_args(url, scenarios, db)],
            cwd=tmp_path,
            env=child_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a process group of its own, as a terminal's job
        )
        try:
            deadline = time.monotonic() + 30
            bound = False
            while time.monotonic() < deadline and not bound:
                time.sleep(0.01)
                with suppress(sqlalchemy.exc.OperationalError):  # no table yet
                    bound = db_path(db).exists() and bool(
                        query(db, "SELECT id FROM run WHERE status = 'running'")
                    )
            recorders = children_with(proc.pid, RECORDER)
            os.killpg(proc.pid, signal.SIGINT)  # the recorder may well be still importing
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(recorders) == 1
    assert not alive(recorders[0], wait_s=5)
    assert "storing results failed" not in err, err
    assert run_status(db, "c") == "cancelled", (out, err)
    recs = records(db, "c")
    assert all(r["status"] == "ok" and r["strict"] is not None for r in recs)


def test_a_killed_recorder_stops_the_run_with_a_clear_error(
    tmp_path: Path, valid_text: str, sqlite_url: str
) -> None:
    """A recorder that dies (here: killed) fails the run at once, saying so; no hang."""
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1)  # 21 cells per model and rep

    def slow(_request: dict[str, Any]) -> str:
        time.sleep(0.02)
        return COMPLIANT

    killed: list[int] = []

    def kill_recorder(progress: runner.Progress, final: bool) -> None:
        if progress.done >= 5 and not killed:
            (pid,) = children_with(os.getpid(), RECORDER)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    with FakeOpenAI(models=["m-a"], reply=slow) as fake:
        opts = options(fake.base_url, scenarios, sqlite_url, runs=3, concurrency=3)
        t0 = time.monotonic()
        with pytest.raises(runner.RunError) as err:
            asyncio.run(BenchmarkRun(opts, on_progress=kill_recorder).execute())
        elapsed = time.monotonic() - t0
        served = len(chat_log(fake))
    assert killed
    assert str(err.value) == (
        f"storing results failed: the recorder process (pid {killed[0]}) was killed by signal 9"
    )
    assert elapsed < 20
    assert served < 63  # it stopped: it did not go on sending without storing
    assert run_status(sqlite_url, "r1") == "failed"
    assert not alive(killed[0])


def test_a_store_error_in_the_recorder_stops_the_run_with_the_drivers_message(
    tmp_path: Path, valid_text: str, sqlite_url: str, server: FakeOpenAI
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1, ["security"])
    with get_engine(sqlite_url).begin() as conn:  # the schema, and a table refusing one arm
        conn.execute(
            sqlalchemy.text(
                "CREATE TRIGGER refuse BEFORE INSERT ON record WHEN NEW.arm = 'mandated' "
                "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
            )
        )
    with pytest.raises(runner.RunError) as err:
        execute(options(server.base_url, scenarios, sqlite_url, concurrency=1))
    assert str(err.value) == "storing results failed: IntegrityError: disk on fire"
    assert run_status(sqlite_url, "r1") == "failed"
    assert [r["arm"] for r in records(sqlite_url, "r1")] == ["cold"]  # stored before the error
    assert not children_with(os.getpid(), RECORDER)


# --------------------------------------------------------------------------- faults


FAULT_KINDS = ["429", "500", "503", "timeout", "drop", "malformed", "empty", "no_choices"]
FAULT_REASON = {
    "429": "HTTP 429",
    "500": "HTTP 500",
    "503": "HTTP 503",
    "timeout": "timed out",
    "drop": "connection failed",
    "malformed": "malformed response body",
    "empty": "empty content",
    "no_choices": "no choices",
}


def fault_options(kind: str) -> dict[str, Any]:
    return {"timeout_s": 0.5 if kind == "timeout" else 10.0}


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_transient_fault_is_retried_and_recovers(
    tmp_path: Path, valid_text: str, sqlite_url: str, kind: str
) -> None:
    db_url = sqlite_url
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, 1, ["library-choice", "security"])
    plan = FaultPlan(first_attempts=[kind], retry_after="0.2", hang_s=3)
    with FakeOpenAI(models=["m-a"], reply=lambda _r: COMPLIANT, faults=plan) as fake:
        outcome = execute(options(fake.base_url, scenarios, db_url, **fault_options(kind)))
        served = chat_log(fake)
    assert (outcome.status, outcome.progress.ok, outcome.progress.errors) == ("finished", 6, 0)
    recs = records(db_url, "r1")
    assert_exactly(recs, matrix_cells(["m-a"], sids, 1))
    assert all(r["status"] == "ok" and r["strict"] == 1 and r["attempts"] == 2 for r in recs)
    per_request: dict[str | None, list[str]] = {}
    for e in served:
        per_request.setdefault(e.messages_sha256, []).append(e.outcome)
    assert sorted(per_request.values()) == [[kind, "ok"]] * 6


def persistent_fault_then_retry_errors(
    tmp_path: Path, valid_text: str, db_url: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "scenarios"
    sids = write_scenarios(scenarios, valid_text, 1, ["library-choice", "security"])
    library = load_library(scenarios)
    target = messages_sha256(build_messages(library[sids[0]].scenario, "cold"))
    bad: Cell = ("m-a", sids[0], "cold", 0)
    plan = FaultPlan(per_request={("m-a", target): [kind, kind]}, retry_after="0.2", hang_s=3)
    with FakeOpenAI(models=["m-a"], reply=lambda _r: COMPLIANT, faults=plan) as fake:
        opts = options(fake.base_url, scenarios, db_url, max_attempts=2, **fault_options(kind))
        outcome = execute(opts)
        assert (outcome.progress.ok, outcome.progress.errors) == (5, 1)
        recs = {cells([r])[0]: r for r in records(db_url, "r1")}
        assert set(recs) == matrix_cells(["m-a"], sids, 1)
        err = recs[bad]
        assert err["status"] == "error" and err["strict"] is None and err["response"] is None
        assert FAULT_REASON[kind] in err["error"], err["error"]
        assert "after 2 attempts" in err["error"]

        # an API failure is not a violation: cold is 1/1 with one error, not 1/2
        with Session(get_engine(db_url)) as session:
            summary = summarize(*db_tallies(session, ["r1"]))
        cold = summary.strict[("m-a", "cold")]
        assert (cold.k, cold.n, cold.errors) == (1, 1, 1)

        n_before = len(chat_log(fake))
        argv = [*cli_args(fake.base_url, scenarios, db_url), "--models", "m-a", "--runs", "1"]
        argv += ["--run-id", "r1", "--retry-errors", "--quiet", "--max-attempts", "2"]
        argv += ["--timeout", str(opts.timeout_s)]
        assert cli.main(["run", *argv]) == 0, capsys.readouterr().err
        resent = chat_log(fake)[n_before:]
    assert "sent 1 (1 ok, 0 errors), 5 already done" in capsys.readouterr().out
    assert [(e.model, e.messages_sha256, e.outcome) for e in resent] == [("m-a", target, "ok")]
    after = {cells([r])[0]: r for r in records(db_url, "r1")}
    assert set(after) == set(recs)
    fixed = after[bad]
    assert fixed["id"] == err["id"]  # replaced in place, not added
    assert fixed["status"] == "ok" and fixed["error"] is None and fixed["strict"] == 1
    assert fixed["attempts"] == 3
    for cell, rec in recs.items():
        if cell != bad:
            assert after[cell]["created"] == rec["created"]


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_persistent_fault_becomes_an_error_record_then_retry_errors_fixes_it(
    tmp_path: Path,
    valid_text: str,
    sqlite_url: str,
    kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    persistent_fault_then_retry_errors(tmp_path, valid_text, sqlite_url, kind, capsys)


def test_retry_errors_replaces_error_records_in_place_on_every_store(
    tmp_path: Path, valid_text: str, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    persistent_fault_then_retry_errors(tmp_path, valid_text, db_url, "503", capsys)


@pytest.mark.parametrize(
    ("retry_after", "cap", "low", "high"),
    [
        ("3600", "1.0", 0.95, 3.0),  # an hour asked, the cap wins
        ("0.8", "60", 0.75, 3.0),  # below the cap: honoured as sent
    ],
)
def test_retry_after_is_honoured_up_to_the_cap(
    tmp_path: Path,
    valid_text: str,
    sqlite_url: str,
    capsys: pytest.CaptureFixture[str],
    retry_after: str,
    cap: str,
    low: float,
    high: float,
) -> None:
    db_url = sqlite_url
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1, ["security"])
    plan = FaultPlan(first_attempts=["429"], retry_after=retry_after)
    with FakeOpenAI(models=["m-a"], reply=lambda _r: COMPLIANT, faults=plan) as fake:
        argv = [*cli_args(fake.base_url, scenarios, db_url), "--models", "m-a", "--runs", "1"]
        argv += ["--arms", "cold", "--retry-after-cap", cap, "--quiet"]
        t0 = time.monotonic()
        assert cli.main(["run", *argv]) == 0, capsys.readouterr().err
        elapsed = time.monotonic() - t0
        served = chat_log(fake)
    assert [e.outcome for e in served] == ["429", "ok"]
    waited = served[1].t - served[0].t
    assert low <= waited <= high, waited
    assert elapsed < high + 5


# --------------------------------------------------------------------------- clear errors


def test_missing_key_variable_is_named_and_nothing_is_sent(
    tmp_path: Path, scenario_dir: Path, server: FakeOpenAI
) -> None:
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    proc = cvb(
        ["run", "--models", "m-a", *cli_args(server.base_url, scenario_dir, db)], tmp_path, key=None
    )
    assert_clean_failure(proc, KEY_VAR, "not set")
    assert server.log == []


@pytest.mark.parametrize(
    ("case", "needles"),
    [
        ("wrong-key", ["401", "refused the key", KEY_VAR]),
        ("unknown-model", ["m-x", "not offered", "catalog has: m-a, m-b"]),
        ("no-default-model", ["none of the default models", "catalog has: m-a, m-b", "--models"]),
        ("unreachable", ["cannot reach", "127.0.0.1"]),
        ("key-revoked-mid-run", ["refused the API key (HTTP 401)"]),
    ],
)
def test_endpoint_problems_stop_the_run_with_a_clear_message(
    tmp_path: Path, valid_text: str, case: str, needles: list[str]
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1)  # 7 scenarios, 21 cells per model
    db = f"sqlite:///{tmp_path / 'cvb.db'}"
    wrong_key = "sk-wrong-Kq81Distinctive55"

    def revoke(_request: dict[str, Any]) -> str:
        fake.api_key = "sk-rotated-elsewhere"  # later requests get 401
        return COMPLIANT

    with FakeOpenAI(
        models=["m-a", "m-b"], api_key=KEY, reply=revoke if case == "key-revoked-mid-run" else None
    ) as fake:
        url = fake.base_url
        models, key = "m-a", KEY
        if case == "wrong-key":
            key = wrong_key
        elif case == "unknown-model":
            models = "m-a,m-x"
        elif case == "no-default-model":
            models = ""  # no --models: probe the catalog for the preferred ones
        elif case == "unreachable":
            url = f"http://127.0.0.1:{closed_port()}/v1"
        argv = ["run", "--run-id", "e", "--concurrency", "2", "--runs", "1"]
        argv += ["--models", models] if models else []
        proc = cvb([*argv, *cli_args(url, scenarios, db)], tmp_path, key=key, timeout=30)
        chats = chat_log(fake)
    assert_clean_failure(proc, *needles)
    assert KEY not in proc.stderr + proc.stdout and wrong_key not in proc.stderr + proc.stdout
    if case == "key-revoked-mid-run":
        outcomes = Counter(e.outcome for e in chats)
        assert outcomes["ok"] >= 1
        assert 1 <= outcomes["unauthorized"] <= 2  # stopped at once, not 21 refusals
        assert run_status(db, "e") == "failed"
    else:
        assert chats == []


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--runs", "2"], "runs: 1 → 2"),
        (["--models", "m-a,m-b"], "models: ['m-a'] → ['m-a', 'm-b']"),
        (["--arms", "cold"], "arms: "),
    ],
)
def test_a_changed_matrix_under_an_existing_run_id_is_refused(
    tmp_path: Path,
    scenario_dir: Path,
    db_url: str,
    server: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
    change: list[str],
    needle: str,
) -> None:
    execute(options(server.base_url, scenario_dir, db_url, run_id="fixed"))
    stored = records(db_url, "fixed")
    n_chats = len(chat_log(server))
    argv = ["--models", "m-a", "--runs", "1", *cli_args(server.base_url, scenario_dir, db_url)]
    argv += ["--run-id", "fixed", "--quiet", *change]
    assert cli.main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert "run 'fixed' exists with a different matrix" in err and needle in err, err
    assert "--run-id" in err
    assert len(chat_log(server)) == n_chats  # no chat completion was sent
    assert records(db_url, "fixed") == stored


# --------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("concurrency", [1, 3, 6])
def test_concurrency_bounds_requests_in_flight(
    tmp_path: Path, valid_text: str, sqlite_url: str, concurrency: int
) -> None:
    db_url = sqlite_url
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, 1)  # 21 cells for one model
    lock = threading.Lock()
    now = 0
    peak = 0

    def slow(_request: dict[str, Any]) -> str:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        time.sleep(0.08)
        with lock:
            now -= 1
        return COMPLIANT

    with FakeOpenAI(models=["m-a"], reply=slow) as fake:
        outcome = execute(options(fake.base_url, scenarios, db_url, concurrency=concurrency))
    assert outcome.progress.ok == 21
    assert peak <= concurrency
    assert peak == concurrency  # and the bound is actually used


# --------------------------------------------------------------------------- answer outcomes


def _completion(content: str, finish: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-outcomes",
        "object": "chat.completion",
        "created": 0,
        "model": "m-a",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def test_outcomes_reasoning_and_truncation_are_stored_and_reported(
    tmp_path: Path, valid_text: str, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """cold refuses (no code: it honors nothing, not even the "no requests" constraint);
    mandated answers with its reasoning in a separate field; incentivized is a reasoning
    model cut off by max_tokens inside its reasoning (content empty: an answer without
    code, not an API failure)."""
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=["library-choice"])
    index = prompt_index(scenarios)

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        arm = cell_of(request, index)[2]
        if arm == "cold":
            return _completion("I'm sorry, but I can't help with that.")
        if arm == "mandated":
            return _completion(COMPLIANT, reasoning_content="use httpx with a timeout")
        return _completion("", "length", reasoning_content="Let me think about retries and")

    with FakeOpenAI(models=["m-a"], reply=reply) as fake:
        outcome = execute(options(fake.base_url, scenarios, db_url, run_id="outcomes"))
    assert outcome.status == "finished" and outcome.progress.errors == 0
    rows = query(
        db_url,
        "SELECT arm, outcome, truncated, reasoning, strict, n_honored, scoring_version "
        "FROM record WHERE run_id = :r ORDER BY arm",
        r="outcomes",
    )
    by_arm = {r[0]: tuple(r[1:]) for r in rows}
    assert by_arm["cold"] == ("no-code", False, None, False, 0, 3)
    assert by_arm["mandated"] == ("answered", False, "use httpx with a timeout", True, 2, 3)
    assert by_arm["incentivized"] == (
        "no-code",
        True,
        "Let me think about retries and",
        False,
        0,
        3,
    )

    assert cli.main(["report", "outcomes", "--db", db_url]) == 0
    md = capsys.readouterr().out
    assert "## Answer outcomes" in md
    assert "| m-a | cold | 0.000 | 0.000 | 1.000 | 0.000 | – | – |" in md
    assert "| m-a | mandated | 1.000 | 0.000 | 0.000 | 0.000 | 1.000 (1/1) | 1.000 |" in md
    assert "| m-a | incentivized | 0.000 | 0.000 | 1.000 | 1.000 | – | – |" in md
    assert "Judged by older rules" not in md

    out_json = tmp_path / "o.json"
    assert cli.main(["report", "outcomes", "--db", db_url, "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert data["format"] == "cvb-results/2"
    got = {r["arm"]: (r["outcome"], r["truncated"], r["reasoning"]) for r in data["records"]}
    assert got["incentivized"] == ("no-code", True, "Let me think about retries and")
    assert all(r["scoring_version"] == 3 for r in data["records"])


def test_a_run_judged_by_older_rules_says_so_until_rescored(
    tmp_path: Path, valid_text: str, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=["library-choice"])
    with FakeOpenAI(models=["m-a"], reply=lambda _r: COMPLIANT) as fake:
        execute(options(fake.base_url, scenarios, sqlite_url, run_id="old"))
    engine = get_engine(sqlite_url)
    with engine.begin() as conn:  # as a store migrated from schema 2 holds them
        conn.execute(sqlalchemy.text("UPDATE record SET scoring_version = NULL, outcome = NULL"))
    assert cli.main(["report", "old", "--db", sqlite_url]) == 0
    assert "Judged by older rules" in capsys.readouterr().out
    argv = ["score", "old", "--db", sqlite_url, "--scenarios", str(scenarios)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "3 had been judged by older scoring rules" in out
    assert cli.main(["report", "old", "--db", sqlite_url]) == 0
    assert "Judged by older rules" not in capsys.readouterr().out


def test_rescoring_is_an_engine_function(tmp_path: Path, valid_text: str, sqlite_url: str) -> None:
    """What `cvb score` does, called without the CLI: counts returned, not printed."""
    from cvb_engine.rescore import RescoreError, rescore_run

    scenarios = tmp_path / "scenarios"
    write_scenarios(scenarios, valid_text, per_category=1, categories=["library-choice"])
    with FakeOpenAI(models=["m-a"], reply=lambda _r: COMPLIANT) as fake:
        execute(options(fake.base_url, scenarios, sqlite_url, run_id="old"))
    with get_engine(sqlite_url).begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE record SET scoring_version = NULL, outcome = NULL"))
    library = load_library(scenarios)
    done = rescore_run("old", library, db=sqlite_url)
    assert (done.run_id, done.scored, done.older_rules, done.verdicts_changed) == ("old", 3, 3, 3)
    assert (done.scenario_changed, done.scenario_missing) == (0, 0)
    again = rescore_run("old", {}, db=sqlite_url)  # no scenario: every record skipped
    assert (again.scored, again.scenario_missing) == (0, 3)
    with pytest.raises(RescoreError, match="no run 'nope' in sqlite"):
        rescore_run("nope", library, db=sqlite_url)
