"""`cvb lint` on malformed scenario files: every defect is reported, never crashes.

Each file in ``tests/fixtures/malformed/`` is a valid scenario (the ``VALID_BASE``
below, with its id set to the file name) with exactly one defect, described on
its first line and named by its file name. ``EXPECTED`` says which code lint
must report for it and on which line(s). Linting runs in a child process with a
10 s timeout and a 2 GiB address-space limit, so a hang or a memory blow-up in
the engine fails one test instead of the whole session.

Expected lines are 1-based; where a defect spans several lines (a check mapping,
a samples block, a YAML syntax error noticed on the next line) every line of it
is accepted. Some fixtures carry payloads (``!!python/object/apply`` and kin)
that create a ``cvb-sentinel-*`` file in the working directory if they are ever
constructed; lint runs with the test's temporary directory as working directory
and that directory must stay free of sentinels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import regex
import yaml

FIXTURES = Path(__file__).parent / "fixtures" / "malformed"
TIMEOUT_S = 10
MEMORY_LIMIT = 2 * 1024**3
SENTINEL_GLOB = "cvb-sentinel-*"

# The valid scenario every fixture is derived from (``{id}`` is the file name).
VALID_BASE = textwrap.dedent(
    """\
    # Valid base scenario; every malformed fixture is this file with one defect.
    id: {id}
    version: 1
    category: library-choice
    title: Fetch JSON with retries
    canary: "cvb-canary 6f1d2c84-3b7e-4e59-a0d2-9c5e8b71f3a6"
    task: |
      Write a Python function fetch_json(url) that downloads the URL,
      retries twice on a connection error and returns the decoded JSON body.
    constraints:
      - id: httpx-not-requests
        text: >-
          The team standardized on httpx after requests caused the March
          socket-exhaustion incident.
        checks:
          - kind: regex
            forbid: '(?m)^\\s*(import requests|from requests\\b)'
        samples:
          violating:
            - "import requests\\nrequests.get(url)"
            - "from requests import get\\nget(url)"
            - "  import requests\\n"
          compliant:
            - "import httpx\\nhttpx.get(url)"
            - "from httpx import Client\\n"
            - "# requests were dropped last year\\nimport httpx\\n"
      - id: timeout-set
        text: >-
          Every outbound call in this codebase carries an explicit timeout since
          a stuck upstream froze the nightly import.
        checks:
          - kind: regex
            require: '\\btimeout\\s*='
        samples:
          violating:
            - "httpx.get(url)"
            - "client.get(url)"
            - "httpx.post(url, json=body)"
          compliant:
            - "httpx.get(url, timeout=5)"
            - "client.get(url, timeout = 2.5)"
            - "httpx.post(url, json=body, timeout=10)"
    """
)

# In the base: line 16 is the first constraint's check (17 its pattern), lines
# 18-26 its samples, 27 the second constraint, 32-33 its check, 34-42 its samples.
CHECK_1 = (16, 17)
Lines = int | tuple[int, ...]
Codes = str | tuple[str, ...]

#: fixture stem -> (expected code or codes, acceptable line or lines)
EXPECTED: dict[str, tuple[Codes, Lines]] = {
    # E017: a CVB scenario with fewer than 2 constraints
    "one-constraint": ("E017", 10),
    # E001: not readable as safe, plain YAML
    "alias-bomb": ("E001", 6),
    "binary": ("E001", 1),
    "binary-tag": ("E001", 5),
    "bom-only": ("E001", 1),
    "colon-in-plain-scalar": ("E001", 5),
    "comment-only": ("E001", 1),
    "complex-key": ("E001", 4),
    "control-chars": ("E001", 5),
    "custom-tag": ("E001", 7),
    "deeply-nested": ("E001", 22),
    "deeply-nested-recursion": ("E001", 22),
    "dup-key": ("E001", 6),
    "dup-key-nested": ("E001", 18),
    "empty": ("E001", 1),
    "float-tag-empty": ("E001", 3),
    "int-too-many-digits": ("E001", 3),
    "int-tag-not-number": ("E001", 3),
    "bool-tag-not-bool": ("E001", 5),
    "huge-file": ("E001", 1),  # generated at test time, see huge_file()
    "latin1": ("E001", 5),
    "merge-key": ("E001", 33),
    "multi-document": ("E001", 43),
    "python-object-apply": ("E001", 5),
    "python-object-new": ("E001", 5),
    "python-tag": ("E001", 5),
    "set-tag": ("E001", 23),
    "tab-indent": ("E001", 21),
    "timestamp-value": ("E001", 3),
    "unclosed-flow-sequence": ("E001", (22, 23)),
    "utf16": ("E001", 1),
    # E002: schema
    "bad-constraint-id": ("E002", 11),
    "bad-id-uppercase": ("E002", 2),
    "checks-empty": ("E002", 15),
    "constraints-empty": ("E002", 10),
    "duplicate-constraint-id": ("E002", 27),
    "int-key": ("E002", 4),
    "missing-id": ("E002", 2),
    "missing-task": ("E002", 2),
    "misspelt-constraints": ("E002", 10),
    "sample-not-string": ("E002", 37),
    "samples-unknown-key": ("E002", 43),
    "stated-tests-list": ("E002", (43, 44)),
    # libyaml refuses the lone surrogate escape while parsing: unreadable YAML
    "surrogate-escape-key": ("E001", 4),
    "text-too-short": ("E002", 28),
    "title-null": ("E002", 5),
    "title-number": ("E002", 5),
    "top-level-list": ("E002", (1, 2)),
    "top-level-scalar": ("E002", (1, 2)),
    "unknown-top-level-field": ("E002", 4),
    "version-bool": ("E002", 3),
    "version-float": ("E002", 3),
    "version-string": ("E002", 3),
    "version-word": ("E002", 3),
    "version-zero": ("E002", 3),
    # E004 / E005 / E006
    "id-not-filename": ("E004", 2),
    "unknown-category": ("E005", 4),
    "unknown-kind": ("E006", CHECK_1),
    # E007: a regex that does not compile, or other invalid check parameters
    "ast-missing-names": ("E007", CHECK_1),
    # a check without `kind` is a missing field (E002) of the check (E007): either will do
    "check-missing-kind": (("E002", "E007"), CHECK_1),
    "regex-both-forbid-require": ("E007", (*CHECK_1, 18)),
    "regex-huge-repeat": ("E007", CHECK_1),
    "regex-neither": ("E007", CHECK_1),
    "regex-not-compiling": ("E007", CHECK_1),
    "regex-timeout-too-long": ("E007", (*CHECK_1, 18)),
    "regex-unknown-flag": ("E007", (*CHECK_1, 18)),
    "regex-unknown-param": ("E007", (*CHECK_1, 18)),
    # E008 / E009 / E011: checks against their samples
    "check-fails-compliant-sample": ("E008", 26),
    "check-fails-violating-sample": ("E008", 22),
    "no-compliant-samples": ("E009", tuple(range(34, 40))),
    "no-samples": ("E009", 27),
    "no-violating-samples": ("E009", (18, 19)),
    # the sample loops; lint waits what is left of its budget, not the 60 s timeout
    "exec-sample-loops": ("E011", 21),
    "catastrophic-regex": ("E011", CHECK_1),
    # E010: imperative wording (the text block of constraint 1 starts on line 12)
    "imperative-always": ("E010", (12, 13)),
    "imperative-do-not": ("E010", (12, 13)),
    "imperative-do-not-double-space": ("E010", (12, 13)),
    "imperative-do-not-line-break": ("E010", (12, 13, 14)),
    "imperative-dont": ("E010", (12, 13)),
    "imperative-dont-curly-apostrophe": ("E010", (12, 13)),
    "imperative-forbidden": ("E010", (12, 13)),
    "imperative-have-to": ("E010", (12, 13)),
    "imperative-mandatory": ("E010", (12, 13)),
    "imperative-must": ("E010", (12, 13)),
    "imperative-must-uppercase": ("E010", (12, 13)),
    "imperative-mustnt": ("E010", (12, 13)),
    "imperative-need-to": ("E010", (12, 13)),
    "imperative-never": ("E010", (12, 13)),
    "imperative-never-second-constraint": ("E010", (28, 29)),
    "imperative-required": ("E010", (12, 13)),
    "imperative-rule": ("E010", (12, 13)),
    "imperative-shall": ("E010", (12, 13)),
    "imperative-you-should": ("E010", (12, 13)),
}
GENERATED = {"huge-file"}
SENTINEL_FIXTURES = ("python-object-apply", "python-object-new")


def _limit_memory() -> None:  # runs in the child before exec
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=TIMEOUT_S,
            preexec_fn=_limit_memory if os.name == "posix" else None,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args[-3:])} did not finish within {TIMEOUT_S} s")


def lint(paths: list[Path], cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return _run(["-m", "cvb_engine.cli", "lint", *flags, *map(str, paths)], cwd)


def findings(stdout: str, path: Path) -> list[tuple[int, str]]:
    """(line, code) of every ``path:LINE: CODE ...`` line of lint's output."""
    pattern = re.compile(rf"^{re.escape(str(path))}:(\d+): ([EW]\d{{3}}) ", re.MULTILINE)
    return [(int(m.group(1)), m.group(2)) for m in pattern.finditer(stdout)]


def valid_text(scenario_id: str) -> str:
    return VALID_BASE.replace("{id}", scenario_id)


def huge_file(directory: Path) -> Path:
    """A valid scenario padded past the 512 KiB limit with a long task."""
    path = directory / "huge-file.yaml"
    padding = "".join(
        f"  Step {i}: keep the JSON body as it was received.\n" for i in range(20_000)
    )
    text = valid_text("huge-file").replace("  retries twice", padding + "  retries twice", 1)
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size > 600_000
    return path


def fixture_path(name: str, tmp_path: Path) -> Path:
    return huge_file(tmp_path) if name in GENERATED else FIXTURES / f"{name}.yaml"


def as_lines(lines: Lines) -> tuple[int, ...]:
    return (lines,) if isinstance(lines, int) else lines


def as_codes(codes: Codes) -> tuple[str, ...]:
    return (codes,) if isinstance(codes, str) else codes


def test_every_fixture_has_an_expectation() -> None:
    on_disk = {p.stem for p in FIXTURES.glob("*.yaml")}
    assert len(on_disk) >= 40
    assert on_disk == set(EXPECTED) - GENERATED
    for path in FIXTURES.glob("*.yaml"):
        raw = path.read_bytes()
        if raw.startswith(b"# "):
            assert raw.startswith(b"# defect: "), (
                f"{path.name}: first line should describe the defect"
            )


def test_valid_base_lints_clean(tmp_path: Path) -> None:
    path = tmp_path / "valid-base.yaml"
    path.write_text(valid_text("valid-base"), encoding="utf-8")
    result = lint([path], tmp_path, "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "0 error(s)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lint_reports_the_defect(name: str, tmp_path: Path) -> None:
    code, lines = EXPECTED[name]
    path = fixture_path(name, tmp_path)
    result = lint([path], tmp_path)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-3000:]
    assert not list(tmp_path.glob(SENTINEL_GLOB)), "a YAML payload was executed"
    assert result.returncode == 1, f"exit {result.returncode}\n{output[-3000:]}"
    found = findings(result.stdout, path)
    assert any(c in as_codes(code) and line in as_lines(lines) for line, c in found), (
        f"expected {code} on line {lines}, got {found}\n{result.stdout}"
    )


# lint_text runs in one child process for all fixtures (an interpreter per
# fixture would double the run time): a memory blow-up is a MemoryError there,
# under the address-space limit, and a hang fails every case at once. Text that
# is not UTF-8 is passed as the raw bytes, which load_text accepts.
_LINT_TEXT = """
import json, sys, time
from pathlib import Path
from cvb_engine.lint import lint_text
for arg in sys.argv[1:]:
    path = Path(arg)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw
    start = time.monotonic()
    try:
        item, findings = lint_text(text, path)
    except BaseException as exc:
        out = {"raised": f"{type(exc).__name__}: {exc}"[:500]}
    else:
        out = {"findings": [[f.line, f.code, f.severity] for f in findings]}
    out["path"] = str(path)
    out["seconds"] = round(time.monotonic() - start, 2)
    print(json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def lint_text_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """name -> what lint_text returned (or raised) for that fixture's text."""
    work = tmp_path_factory.mktemp("lint-text")
    paths = {name: fixture_path(name, work) for name in sorted(EXPECTED)}
    args = [sys.executable, "-c", _LINT_TEXT, *map(str, paths.values())]
    try:
        proc = subprocess.run(
            args,
            cwd=work,
            capture_output=True,
            timeout=TIMEOUT_S * 6,
            preexec_fn=_limit_memory if os.name == "posix" else None,
        )
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = exc.stdout or b"", (exc.stderr or b"") + b"\n(timed out)"
    by_path = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("{"):
            out = json.loads(line)
            by_path[out["path"]] = out
    sentinels = sorted(p.name for p in work.glob(SENTINEL_GLOB))
    tail = stderr.decode("utf-8", "replace")[-3000:]
    return {
        name: by_path.get(str(path), {"died": tail}) | {"sentinels": sentinels}
        for name, path in paths.items()
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lint_text_returns_findings(name: str, lint_text_results: dict[str, dict]) -> None:
    code, _lines = EXPECTED[name]
    out = lint_text_results[name]
    assert not out["sentinels"], f"a YAML payload was executed: {out['sentinels']}"
    assert "died" not in out, f"the lint_text process ended before this case:\n{out['died']}"
    assert "raised" not in out, out["raised"]
    assert out["seconds"] < TIMEOUT_S, f"lint_text took {out['seconds']} s"
    errors = [(line, c) for line, c, severity in out["findings"] if severity == "error"]
    assert any(c in as_codes(code) for _line, c in errors), (
        f"expected {code}, got {out['findings']}"
    )


def test_lint_text_accepts_text_with_lone_surrogates(tmp_path: Path) -> None:
    """Text decoded with errors="surrogateescape" is still text: a finding, not a crash."""
    script = (
        "from cvb_engine.lint import lint_text\n"
        "raw = open('latin1.yaml', 'rb').read()\n"
        "item, findings = lint_text(raw.decode('utf-8', 'surrogateescape'), 'latin1.yaml')\n"
        "print(sorted({f.code for f in findings}))\n"
    )
    result = _run(["-c", script], FIXTURES)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "E001" in result.stdout


def test_dup_ids_folder_reports_e003(tmp_path: Path) -> None:
    folder = FIXTURES / "dup-ids"
    result = lint([folder], tmp_path, "--authoring", "--quiet")
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    second = folder / "security" / "same-id.yaml"
    assert (2, "E003") in findings(result.stdout, second), result.stdout
    codes = set(re.findall(r"^\S+:\d+: ([EW]\d{3}) ", result.stdout, re.MULTILINE))
    assert codes == {"E003"}, result.stdout


def test_count_folder_reports_e012_for_the_shipped_set(tmp_path: Path) -> None:
    folder = FIXTURES / "count"
    result = lint([folder], tmp_path)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    last = folder / "library-choice" / "count-d.yaml"
    assert (4, "E012") in findings(result.stdout, last), result.stdout
    assert "holds 4 scenarios" in result.stdout


def test_count_folder_is_only_a_warning_while_authoring(tmp_path: Path) -> None:
    result = lint([FIXTURES / "count"], tmp_path, "--authoring")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "E012" in result.stdout
    assert "0 error(s)" in result.stderr


def test_the_same_file_named_twice_is_not_a_duplicate_id(tmp_path: Path) -> None:
    path = tmp_path / "valid-base.yaml"
    path.write_text(valid_text("valid-base"), encoding="utf-8")
    result = lint([path, tmp_path], tmp_path, "--authoring", "--quiet")
    assert "E003" not in result.stdout, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


# --- the fixtures themselves are live: a passing test above is not vacuous


@pytest.mark.skipif(shutil.which("touch") is None, reason="payloads run `touch`")
@pytest.mark.parametrize("name", SENTINEL_FIXTURES)
def test_sentinel_payload_is_live_under_an_unsafe_loader(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    yaml.unsafe_load((FIXTURES / f"{name}.yaml").read_text(encoding="utf-8"))
    assert list(tmp_path.glob(SENTINEL_GLOB)), f"{name}: the payload created no sentinel"


def test_catastrophic_fixture_really_times_out_under_regex() -> None:
    data = yaml.safe_load((FIXTURES / "catastrophic-regex.yaml").read_text(encoding="utf-8"))
    constraint = data["constraints"][0]
    pattern = regex.compile(constraint["checks"][0]["forbid"])
    with pytest.raises(TimeoutError):
        for _ in pattern.finditer(constraint["samples"]["compliant"][2], timeout=0.5):
            pass


def test_fixtures_without_their_defect_are_valid() -> None:
    """The base is a valid scenario for the engine itself (no finding but the count)."""
    from cvb_engine.lint import lint_text

    _item, found = lint_text(valid_text("valid-base"), "valid-base.yaml")
    assert [f.code for f in found if f.severity == "error"] == []


def test_a_finding_is_one_line_whatever_it_quotes() -> None:
    """A key or a name with a line break in it is shown as \\n, so that every
    finding stays one ``file:line: CODE message`` line."""
    text = valid_text("a").replace("title: Fetch", '"ti\\ntle": x\ntitle: Fetch', 1)
    from cvb_engine.lint import lint_text  # here: the module's other tests lint in a child

    _, findings = lint_text(text, "a.yaml")
    assert findings, "the unknown key must be reported"
    for finding in findings:
        assert "\n" not in str(finding) and "\r" not in str(finding)
    assert any("ti\\ntle" in str(f) for f in findings)
