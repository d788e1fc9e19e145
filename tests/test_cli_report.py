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


# --------------------------------------------------------------------------- hostile files

_RECORD = (
    '{"model":"m","scenario_id":"s-1","category":"c","arm":"mandated","rep":0,"status":"ok",'
    '"constraints":{"c1":{"honored":true}},"strict":true}'
)


def _file(records: str, top: str = "") -> str:
    return f'{{"format":"cvb-results/2",{top}"records":[{records}]}}'


HOSTILE_FILES = {
    "huge-int-rep": (_file(_RECORD.replace('"rep":0', '"rep":' + "9" * 5000)), "4,300 digits"),
    "huge-int-in-params": (_file("", '"run":{"params":{"x":' + "9" * 5000 + "}},"), "4,300"),
    "nan": (_file(_RECORD.replace('"rep":0', '"rep":0,"latency_s":NaN')), "finite"),
    "infinity": (_file(_RECORD.replace('"rep":0', '"rep":0,"latency_s":1e999')), "finite"),
    "negative-rep": (_file(_RECORD.replace('"rep":0', '"rep":-1')), "records[0].rep"),
    "deep-nesting": (_file("", '"run":{"params":{"x":' + "[" * 50_000 + "]" * 50_000 + "}},"), ""),
    "traversal-scenario-id": (
        _file(_RECORD.replace('"s-1"', '"../../etc/passwd"')),
        "records[0].scenario_id: a scenario id is",
    ),
    "glob-scenario-id": (_file(_RECORD.replace('"s-1"', '"*"')), "records[0].scenario_id"),
    "traversal-run-id": (_file("", '"run":{"id":"../../x"},'), "run.id"),
    "long-name": (_file(_RECORD.replace('"model":"m"', '"model":"' + "m" * 1000 + '"')), "500"),
    "wrong-type": (_file(_RECORD.replace('"strict":true', '"strict":"yes"')), "records[0].strict"),
    "top-level-list": ("[1, 2]", "top level"),
    "malformed-evidence": (
        _file(
            _RECORD.replace(
                '{"honored":true}',
                '{"honored":true,"checks":[{"id":"k","kind":"regex","passed":true,'
                '"reason":"r","evidence":[{"line":"x"}]}]}',
            )
        ),
        "evidence[0].line",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE_FILES), ids=list(HOSTILE_FILES))
def test_a_hostile_results_file_gets_a_clear_error(tmp_path: Path, name: str) -> None:
    content, fragment = HOSTILE_FILES[name]
    bad = tmp_path / "hostile.json"
    bad.write_text(content, encoding="utf-8")
    out = cvb("report", str(bad), "--markdown", str(tmp_path / "out.md"))
    assert out.returncode == 2, out.stdout
    assert "Traceback" not in out.stderr and str(bad) in out.stderr
    assert fragment in out.stderr, out.stderr
    assert not (tmp_path / "out.md").exists()  # nothing written for a refused file


def test_a_results_file_past_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(_file(",".join([_RECORD] * 20_000)), encoding="utf-8")  # about 3 MB
    out = subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", "report", str(big)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "CVB_MAX_RESULTS_MB": "1"},
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "cvb reads results files up to 1 MB (set CVB_MAX_RESULTS_MB" in out.stderr


def test_thousands_of_models_and_categories_stay_bounded(tmp_path: Path) -> None:
    """3,000 models × 3,000 categories in under 1 MB: the report draws each table within
    its budget and says how much more there is (linear work, bounded output)."""
    records = []
    for i in range(3_000):
        for arm in ("mandated", "incentivized"):
            records.append(
                _RECORD.replace('"model":"m"', f'"model":"m{i}"')
                .replace('"category":"c"', f'"category":"c{i}"')
                .replace('"arm":"mandated"', f'"arm":"{arm}"')
                .replace('"s-1"', f'"s-{i}"')
            )
    wide = tmp_path / "wide.json"
    wide.write_text(_file(",".join(records)), encoding="utf-8")
    out_md, out_html = tmp_path / "wide.md", tmp_path / "wide.html"
    made = cvb("report", str(wide), "--markdown", str(out_md), "--html", str(out_html))
    assert made.returncode == 0, made.stderr
    md = out_md.read_text(encoding="utf-8")
    assert "more columns not shown" in md and "more rows not shown" in md
    assert out_md.stat().st_size < 20_000_000 and out_html.stat().st_size < 40_000_000
