"""bwrap works wherever the interpreter lives: here, in a virtual environment under /tmp.

A venv under ``/tmp`` is the usual CI layout, and the one the sandbox's private
``/tmp`` used to hide (``bwrap: execvp …/bin/python: No such file or
directory``), after which execution fell back, silently, to a backend that runs
code on the real file system. These tests run the sandbox's self-test, the
zygote's clean-up and the whole hostile-solution table
(``tests/checks/test_exec_check.py``) with the interpreter in such a venv.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import need

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    need("bwrap")


@pytest.fixture(scope="module")
def tmp_venv() -> Iterator[Path]:
    """A venv directly under /tmp that sees this interpreter's packages (and the project)."""
    root = Path(tempfile.mkdtemp(prefix="cvb-venv-", dir="/tmp"))
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)],
        check=True,
        timeout=120,
    )
    # This interpreter's own packages too, when it is itself a venv (whose base
    # --system-site-packages would name instead): a .pth, as an install would add.
    purelib = subprocess.run(
        [
            str(root / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    here = list(dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"]]))
    Path(purelib, "cvb-outer-site.pth").write_text("\n".join(here) + "\n")
    try:
        yield root / "bin" / "python"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def in_venv(
    python: Path, args: list[str], timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    child = {k: v for k, v in os.environ.items() if not k.startswith("CVB_SANDBOX")}
    child.update(env)
    return subprocess.run(
        [str(python), *args],
        cwd=REPO,
        env=child,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_venv_is_under_tmp_and_bwrap_passes_its_self_test(tmp_venv: Path) -> None:
    script = (
        "import sys\n"
        "from cvb_engine import sandbox\n"
        "assert sys.prefix.startswith('/tmp/'), sys.prefix\n"
        "assert sandbox.self_test('bwrap') is None, sandbox.self_test('bwrap')\n"
        "print(sandbox.backend())\n"
    )
    proc = in_venv(tmp_venv, ["-c", script])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "bwrap"


@pytest.mark.parametrize("zygote", ["1", "0"], ids=["zygote", "oneshot"])
def test_code_runs_with_the_venv_read_only_and_the_rest_of_tmp_private(
    tmp_venv: Path, zygote: str
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="cvb-outside-", dir="/tmp"))
    try:
        test = (
            "import os\n"
            f"assert not os.path.exists({str(outside)!r})\n"
            f"VENV = {str(tmp_venv.parent.parent)!r}\n"
            "assert os.path.isdir(VENV)\n"
            "try:\n"
            "    open(VENV + '/planted.pth', 'w')\n"
            "except OSError as exc:\n"
            "    assert exc.errno == 30, exc\n"
            "else:\n"
            "    raise AssertionError('the venv is writable')\n"
        )
        script = (
            "from cvb_engine import sandbox\n"
            "for _ in range(3):\n"  # the zygote sweeps /tmp between executions: the venv stays
            f"    r = sandbox.run_python('', {test!r})\n"
            "    assert r.passed and r.backend == 'bwrap', (r.reason, r.stderr)\n"
        )
        proc = in_venv(tmp_venv, ["-c", script], CVB_SANDBOX_ZYGOTE=zygote)
        assert proc.returncode == 0, proc.stderr
        assert not (tmp_venv.parent.parent / "planted.pth").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_hostile_table_defends_with_the_interpreter_in_a_tmp_venv(tmp_venv: Path) -> None:
    proc = in_venv(
        tmp_venv,
        [
            "-m",
            "pytest",
            "tests/checks/test_exec_check.py",
            "-k",
            "hostile and bwrap",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
        ],
        timeout=900,
        # set at start, so that /proc/PID/environ of the test process shows it
        CVB_TEST_CANARY="cvb-canary",
    )
    tail = proc.stdout[-3000:]
    assert proc.returncode == 0, tail + proc.stderr[-2000:]
    assert "does not work here" not in proc.stdout, tail  # no case skipped for want of bwrap
    assert " passed" in tail and "failed" not in tail, tail
