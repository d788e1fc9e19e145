"""`cvb report` round trip: a stored run → results file → read back, every export format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_dbtools import reply, run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI


def cvb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_report_exports_and_reads_its_results_file_back(scenario_dir: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        run(scenario_dir, server.base_url, url, "rt")
    out = {k: tmp_path / f"out.{k}" for k in ("md", "json", "csv", "html")}
    made = cvb(
        "report",
        "rt",
        "--db",
        url,
        "--markdown",
        str(out["md"]),
        "--json",
        str(out["json"]),
        "--csv",
        str(out["csv"]),
        "--html",
        str(out["html"]),
    )
    assert made.returncode == 0, made.stderr
    data = json.loads(out["json"].read_text())
    assert data["format"] == "cvb-results/2" and len(data["records"]) == 12
    assert out["csv"].read_text().count("\n") == 13
    html = out["html"].read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "<script" not in html.lower()
    back = cvb("report", str(out["json"]))
    assert back.returncode == 0, back.stderr
    # The same tables whether computed from the store or from the file.
    table = out["md"].read_text().split("## Strict accuracy", 1)[1]
    assert (
        table.split("## By category")[0]
        == back.stdout.split("## Strict accuracy", 1)[1].split("## By category")[0]
    )


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param("{not json", ":1: not valid JSON", id="syntax"),
        pytest.param('{"format": "other"}', "format: expected one of 'cvb-results/1'", id="format"),
        pytest.param(
            '{"format": "cvb-results/1", "records": [{"model": 3}]}', "records[0].model", id="field"
        ),
    ],
)
def test_a_bad_results_file_is_named_with_its_field(
    tmp_path: Path, content: str, fragment: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    out = cvb("report", str(bad))
    assert out.returncode == 2 and fragment in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("writer", ["json", "text"])
def test_report_files_are_readable_like_any_file_not_private_temporaries(
    tmp_path: Path, writer: str
) -> None:
    """A report is for sharing: it gets 0666 less the umask (0644 here), as ``open()``
    would give, not the 0600 of the temporary file it is renamed from; an existing
    file keeps its mode."""
    from cvb_engine.results import write_json_atomic, write_text_atomic

    write = write_json_atomic if writer == "json" else write_text_atomic
    old = os.umask(0o022)
    try:
        target = tmp_path / "out" / "report.x"
        write(target, {"a": 1} if writer == "json" else "text")
        assert target.stat().st_mode & 0o777 == 0o644
        target.chmod(0o640)
        write(target, {"a": 2} if writer == "json" else "again")
        assert target.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_python_m_cvb_engine_report_is_cvb_report_and_the_report_module_needs_no_cli(
    scenario_dir: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with FakeOpenAI(models=["m-a", "m-b"], reply=reply) as server:
        run(scenario_dir, server.base_url, url, "as-module")
    made = subprocess.run(
        [sys.executable, "-m", "cvb_engine.report", "as-module", "--db", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout == cvb("report", "as-module", "--db", url).stdout
    assert "as-module" in made.stdout
    probe = "import sys, cvb_engine.report; print('cvb_engine.cli' in sys.modules)"
    alone = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert alone.stdout.strip() == "False", alone.stderr
