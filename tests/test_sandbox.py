"""Tests of ``cvb_engine.sandbox``: verdicts, reasons, limits, clean-up and backends.

The hostile-solution table runs through the ``exec`` check, in
``tests/checks/test_exec_check.py``; this file tests the sandbox's own contract.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proc_scan import alive, processes_with
from sandbox_support import need, unavailable

from cvb_engine import sandbox
from cvb_engine.sandbox import Limits, SandboxError, run_many, run_python
from cvb_engine.sandbox.channel import ResultChannel, parse_results
from cvb_engine.sandbox.launch import HARNESS_PROGRAM, ZYGOTE_PROGRAM, python_roots


def case(id_: str, *values: Any) -> Any:
    return pytest.param(*values, id=id_)


@pytest.fixture(params=sandbox.BACKENDS)
def backend_name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend in turn, forced through CVB_SANDBOX; skipped where it does not work."""
    name: str = request.param
    problem = sandbox.self_test(name)
    if problem is not None:
        unavailable(name, problem)
    monkeypatch.setenv(sandbox.ENV_BACKEND, name)
    return name


@pytest.fixture
def marked_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """Sandbox temp dirs under a uniquely named folder, so that processes can be found by name."""
    marker = f"cvbmark{os.getpid()}x{time.monotonic_ns()}"
    root = tmp_path / marker
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root, marker
    sandbox.shutdown()


def leftovers(marker: str) -> list[str]:
    """Live processes carrying ``marker``, but for the idle zygotes (the sandbox itself)."""
    return processes_with(marker, exclude=sandbox.zygote_pids())


# --- verdicts and reasons -------------------------------------------------------


def test_honest_solution_passes_on_every_backend(backend_name: str) -> None:
    result = run_python("def add(a, b):\n    return a + b\n", "assert add(2, 3) == 5")
    assert result.passed, result
    assert result.backend == backend_name
    assert result.phase == "done"
    assert result.reason == f"passed ({result.duration_s:.2f}s)"
    assert 0 < result.duration_s < 5
    assert not result.timed_out


REASONS = [
    case(
        "assertion-with-line",
        "def add(a, b):\n    return a - b\n",
        "x = 1\nassert add(2, 3) == 5, 'sum'",
        "AssertionError at test line 2: assert add(2, 3) == 5, 'sum' (sum)",
    ),
    case(
        "exception-from-solution",
        "def add(a, b):\n    return a / 0\n",
        "assert add(2, 3) == 5",
        "ZeroDivisionError: division by zero at solution line 2: return a / 0 "
        "(called from test line 1: assert add(2, 3) == 5)",
    ),
    case(
        "solution-import-error",
        "import no_such_module_here\n",
        "pass",
        "solution raised ModuleNotFoundError: No module named 'no_such_module_here' "
        "at solution line 1: import no_such_module_here",
    ),
    case(
        "solution-syntax-error",
        "def add(a b):\n    pass\n",
        "pass",
        "solution does not compile: SyntaxError: invalid syntax at solution line 1: def add(a b):",
    ),
    case(
        "test-syntax-error",
        "x = 1",
        "assert (",
        "test does not compile: SyntaxError: '(' was never closed at test line 1: assert (",
    ),
    case(
        "missing-function",
        "",
        "assert add(2, 3) == 5",
        "NameError: name 'add' is not defined at test line 1: assert add(2, 3) == 5",
    ),
    case(
        "error-inside-library",
        "import json\n",
        "json.loads('{')",
        "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1) at test line 1: json.loads('{')",
    ),
    case(
        "memory-error",
        "x = bytearray(4 * 1024**3)\n",
        "pass",
        "solution raised MemoryError (memory limit reached) at solution line 1: "
        "x = bytearray(4 * 1024**3)",
    ),
    case(
        "system-exit-in-solution",
        "import sys\nsys.exit(0)\n",
        "pass",
        "solution raised SystemExit: 0 at solution line 2: sys.exit(0)",
    ),
    case(
        "system-exit-in-test",
        "def add(a, b):\n    raise SystemExit(0)\n",
        "add(1, 2)",
        "SystemExit: 0 at solution line 2: raise SystemExit(0) (called from test line 1: add(1, 2))",
    ),
    case(
        "os-exit-in-solution",
        "import os\nos._exit(0)\n",
        "pass",
        "exited with status 0 while the solution ran, without a verdict",
    ),
    case(
        "os-exit-in-test",
        "import os\n",
        "os._exit(0)",
        "exited with status 0 during the test, without a verdict",
    ),
    case(
        "killed-by-itself",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "pass",
        "killed by SIGKILL while the solution ran",
    ),
    case(
        "c-stack-overflow",
        "import sys\nsys.setrecursionlimit(10**6)\nx, y = [], []\nfor _ in range(10**5):\n"
        "    x, y = [x], [y]\n",
        "x == y",
        "killed by SIGSEGV during the test",
    ),
]


@pytest.mark.parametrize(("code", "test", "reason"), REASONS)
def test_reasons(code: str, test: str, reason: str) -> None:
    result = run_python(code, test, timeout_s=5)
    assert not result.passed
    assert result.reason == reason


def test_failure_locates_lines() -> None:
    result = run_python("def f(x):\n    y = x\n    return y[5]\n", "a = 1\nf([1])")
    assert (result.solution_line, result.test_line) == (3, 2)
    assert "Traceback" in result.stderr and "return y[5]" in result.stderr


def test_timeout_is_reported_and_kills() -> None:
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", "pass", timeout_s=0.5)
    assert not result.passed and result.timed_out
    assert result.reason == "timed out after 0.5s"
    assert time.monotonic() - started < 3


def test_cpu_limit_kills_a_busy_process() -> None:
    # The CPU limit stops what the wall clock has not yet: 1 s of CPU within a 30 s timeout.
    result = run_python("while True:\n    pass\n", "pass", timeout_s=30, limits=Limits(cpu_s=1))
    assert not result.passed and not result.timed_out
    assert result.reason == "killed: CPU time limit while the solution ran"


def test_exit_status_zero_without_verdict_fails() -> None:
    # A solution that prints what a naive harness would look for, then leaves with status 0.
    code = "import os, sys\nprint('PASS')\nsys.stdout.flush()\nos._exit(0)\n"
    result = run_python(code, "pass")
    assert (result.passed, result.exit_code) == (False, 0)
    assert result.stdout.strip() == "PASS"


def test_records_without_the_nonce_are_ignored() -> None:
    records = b"\nabc PASS\nnonce1 PHASE test\n\nnonce1 FAIL exc=" + b"Oops".hex().encode() + b"\n"
    verdict = parse_results(records + b"xyz PASS\n", "nonce1")
    assert (verdict.passed, verdict.phase) == (False, "test")
    assert verdict.failure == {"exc": "Oops"}
    assert parse_results(b"\nnonce1 PASS\n", "nonce1").passed


def test_flooding_the_result_pipe_does_not_hide_a_pass() -> None:
    code = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'garbage ' * 40_000)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    assert run_python(code, "pass").passed


def test_overlong_result_lines_are_skipped() -> None:
    channel = ResultChannel("n1")
    channel.add(b"n1 PHASE test\n" + b"y" * (ResultChannel.MAX_LINE + 10))
    channel.add(b"n1 PASS\nn1 PHASE start")
    assert channel.verdict.phase == "test" and not channel.verdict.passed
    channel.add(b"\nn1 PASS\n")
    assert channel.verdict.passed


def test_forged_verdicts_on_every_descriptor_fail() -> None:
    code = (
        "import os\n"
        "for fd in range(64):\n"
        "    for line in (b'\\nPASS\\n', b'\\n' + b'0' * 32 + b' PASS\\n'):\n"
        "        try:\n"
        "            os.write(fd, line)\n"
        "        except OSError:\n"
        "            pass\n"
        "os._exit(0)\n"
    )
    assert not run_python(code, "pass").passed


# --- isolation of the environment, files and input -------------------------------


def test_environment_is_an_allow_list(backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    test = (
        "import os\n"
        "allowed = {'PATH', 'LANG', 'HOME', 'PWD', 'TMPDIR', 'PYTHONHASHSEED',\n"
        "           'PYTHONDONTWRITEBYTECODE',\n"
        "           'PYTHONIOENCODING', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'}\n"
        "assert set(os.environ) <= allowed, sorted(set(os.environ) - allowed)\n"
        "assert os.environ['PYTHONHASHSEED'] == '0'\n"
        "assert os.environ['HOME'] == os.getcwd() == os.environ['TMPDIR'] == os.environ['PWD']\n"
    )
    result = run_python("", test)
    assert result.passed, result.reason


def test_stdin_is_empty_and_workdir_fresh_then_removed(marked_tmp: tuple[Path, str]) -> None:
    root, _ = marked_tmp
    code = "import os, sys\nprint(os.getcwd())\nassert sys.stdin.read() == ''\n"
    test = "assert os.listdir('.') == [], os.listdir('.')\nopen('scratch.txt', 'w').write('x')\n"
    first = run_python(code, test)
    second = run_python(code, test)
    assert first.passed and second.passed, (first.reason, second.reason)
    dirs = {Path(first.stdout.strip()), Path(second.stdout.strip())}
    assert len(dirs) == 2 and all(d.is_relative_to(root) for d in dirs)
    assert not any(d.exists() for d in dirs)
    sandbox.shutdown()
    assert list(root.iterdir()) == []


def test_hidden_test_source_is_not_readable() -> None:
    code = "import os\nfiles = os.listdir('.')\n"
    result = run_python(code, "assert files == [], files")
    assert result.passed, result.reason


def test_file_size_and_open_file_limits() -> None:
    big = run_python("open('big', 'wb').write(b'x' * (65 << 20))\n", "pass")
    assert not big.passed and "File too large" in big.reason
    many = run_python("fs = [open('f%d' % i, 'w') for i in range(1000)]\n", "pass")
    assert not many.passed and "Too many open files" in many.reason


def test_task_limit_bounds_threads() -> None:
    if sandbox.info().task_limit is None:
        pytest.skip("no pids cgroup here: nothing bounds processes for root")
    code = (
        "import threading, time\n"
        "threads = []\n"
        "for _ in range(200):\n"
        "    t = threading.Thread(target=time.sleep, args=(2,), daemon=True)\n"
        "    t.start()\n"
        "    threads.append(t)\n"
    )
    result = run_python(code, "pass")
    assert not result.passed
    assert "can't start new thread" in result.reason


def test_multiprocessing_works_within_limits(backend_name: str) -> None:
    code = (
        "import multiprocessing as mp\n"
        "def square(x):\n"
        "    return x * x\n"
        "with mp.Pool(2) as pool:\n"
        "    squares = pool.map(square, range(5))\n"
    )
    result = run_python(code, "assert squares == [0, 1, 4, 9, 16]", timeout_s=10)
    assert result.passed, result.reason + result.stderr


# --- output --------------------------------------------------------------------


def test_output_is_captured_and_capped() -> None:
    code = "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\nprint('x' * 100_000)\n"
    result = run_python(code, "pass")
    assert result.passed
    assert result.stdout.startswith("hello\n")
    assert result.stderr == "warn\n"
    assert len(result.stdout) < 70_000
    assert result.stdout.endswith("more bytes discarded]")


def test_200_mb_writer_is_drained_without_blocking() -> None:
    limits = Limits(output_limit_bytes=1 << 30)
    code = (
        "import sys\nchunk = 'y' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(chunk)\n"
    )
    result = run_python(code, "pass", timeout_s=30, limits=limits)
    assert result.passed, result.reason
    assert len(result.stdout) < (64 << 10) + 100
    assert f"[... {200 * (1 << 20) - (64 << 10)} more bytes discarded]" in result.stdout


def test_output_beyond_the_limit_is_a_failure() -> None:
    result = run_python("import sys\nsys.stdout.write('z' * 200_000_000)\n", "pass", timeout_s=20)
    assert not result.passed
    assert result.reason == "output limit exceeded: more than 16 MiB written"


# --- processes -------------------------------------------------------------------


def test_timeout_kills_children_and_session_leaders(
    backend_name: str, marked_tmp: tuple[Path, str]
) -> None:
    _, marker = marked_tmp
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(60)', '{marker}']"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen({sleeper})\n"
        f"subprocess.Popen({sleeper}, start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    result = run_python(code, "pass", timeout_s=1)
    assert result.timed_out
    assert leftovers(marker) == []


def test_plain_without_cgroup_reaps_daemons(
    monkeypatch: pytest.MonkeyPatch, marked_tmp: tuple[Path, str]
) -> None:
    """Without a cgroup, plain mode relies on its sub-reaper to kill a double-forked daemon."""
    monkeypatch.setenv(sandbox.ENV_CGROUP, "0")
    _, marker = marked_tmp
    assert sandbox.info("plain").task_limit is None
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    result = run_python(code, "pass", backend_name="plain")
    assert result.passed, result.reason
    assert leftovers(marker) == []


def test_parent_survives_signals_aimed_at_it(backend_name: str) -> None:
    """The code's parent is the sandbox's init or supervisor, never the calling process."""
    code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    result = run_python(code, "import time\ntime.sleep(0.3)")
    # a namespace init ignores signals from inside; plain mode's supervisor dies, and the run fails
    assert result.passed == (backend_name != "plain"), result.reason
    assert run_python("x = 1", "assert x == 1").passed


# --- batches, backends, arguments ----------------------------------------------


def test_run_many_keeps_order_and_runs_workers_at_a_time() -> None:
    code = "import time\nprint(time.time())\ntime.sleep(0.5)\nprint(time.time())\nx = {}\n"
    jobs = [(code.format(i), f"assert x == {i}") for i in range(5)]
    jobs.append(("x = 0", "assert x == 1"))
    results = run_many(jobs, workers=2)
    assert [r.passed for r in results] == [True] * 5 + [False]
    windows = [tuple(map(float, r.stdout.split())) for r in results[:5]]
    overlap = [sum(s <= t < e for s, e in windows) for t, _ in windows]
    # measured from inside the sandboxes: two at a time, never three
    assert max(overlap) == 2, windows


def test_backend_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.ENV_BACKEND, "plain")
    assert sandbox.backend() == "plain"
    assert run_python("x = 1", "assert x == 1").backend == "plain"
    monkeypatch.setenv(sandbox.ENV_BACKEND, "docker")
    with pytest.raises(SandboxError, match="expected one of bwrap, unshare, plain"):
        sandbox.backend()


def test_default_backend_is_bwrap_and_never_a_weaker_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.ENV_BACKEND, raising=False)
    available = sandbox.available_backends()
    assert "plain" in available
    if "bwrap" in available:
        assert sandbox.backend() == "bwrap"
    else:  # no silent fallback (tests/test_sandbox_choice.py has the whole contract)
        with pytest.raises(SandboxError, match="--sandbox unshare"):
            sandbox.backend()


@pytest.mark.parametrize(
    ("name", "network", "files"),
    [case("bwrap", "bwrap", True, True), case("plain", "plain", False, False)],
)
def test_info_states_what_is_isolated(name: str, network: bool, files: bool) -> None:
    info = sandbox.info(name)
    assert (info.network_isolated, info.filesystem_isolated) == (network, files)
    assert info.describe().startswith(name)


def test_bwrap_hides_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    need("bwrap")
    # The interpreter's own directories are bound (a checkout's .venv among them), so
    # /work may exist on the way to them; the checkout's files never do.
    checkout = Path(__file__).resolve().parents[1]
    interpreter = os.path.realpath(sys.prefix)
    work_visible = interpreter == "/work" or interpreter.startswith("/work/")
    test = (
        "import os\n"
        "assert not os.path.exists('/etc/shadow')\n"
        "assert not os.path.exists('/home') and not os.path.exists(os.path.expanduser('~root/.ssh'))\n"
        f"assert not os.path.exists({str(checkout / 'README.md')!r})\n"
        f"assert not os.path.exists({str(checkout / 'cvb_engine')!r})\n"
        f"assert {work_visible!r} or not os.path.exists('/work')\n"
        "assert not os.path.exists('/sys/fs/cgroup')\n"
        "try:\n"
        "    open('/usr/evil', 'w')\n"
        "except OSError as exc:\n"
        "    assert exc.errno == 30, exc\n"
        "else:\n"
        "    raise AssertionError('/usr is writable')\n"
    )
    result = run_python("", test, backend_name="bwrap")
    assert result.passed, result.reason


@pytest.mark.parametrize("timeout_s", [0, -1, 601])
def test_timeout_out_of_range_is_a_caller_error(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        run_python("", "pass", timeout_s=timeout_s)


def test_harness_source_compiles() -> None:
    # the programs as the interpreter is given them (a zygote's runs the harness too)
    compile(HARNESS_PROGRAM, "<harness>", "exec")
    compile(ZYGOTE_PROGRAM, "<zygote>", "exec")


# --- the zygote (bwrap) ------------------------------------------------------------


@pytest.fixture
def zygote(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    need("bwrap")
    monkeypatch.setenv(sandbox.ENV_BACKEND, "bwrap")
    monkeypatch.delenv(sandbox.ENV_ZYGOTE, raising=False)
    sandbox.shutdown()
    yield
    sandbox.shutdown()


def test_zygote_serves_executions_one_after_another(zygote: None) -> None:
    probe = "import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
    first = run_python(
        probe + "print(os.getppid(), os.getpid())", "assert pids == [1, os.getpid()]"
    )
    infra = sandbox.zygote_pids()
    second = run_python(probe, "assert pids == [1, os.getpid()]")
    assert first.passed and second.passed, (first.reason, second.reason)
    assert first.stdout.split()[0] == "1"  # the code's parent is the namespace's init
    assert infra and sandbox.zygote_pids() == infra  # the same zygote, reused


LEAVE_TRACES = (
    "import os, subprocess, sys\n"
    "open('/tmp/planted', 'w').write('x')\n"
    "open('/dev/shm/planted', 'w').write('x')\n"
    "open('../planted', 'w').write('x')\n"
    "os.makedirs('/tmp/dir/sub')\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
    "                 start_new_session=True)\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    import time\n"
    "    time.sleep(60)\n"
    "import builtins\n"
    "builtins.planted = True\n"
    "os.environ['PLANTED'] = '1'\n"
)
# An interpreter under /tmp (a checkout's .venv there) is bound at its own path: the one
# entry of the private /tmp that is not a trace.
_BOUND_IN_TMP = sorted({r.split("/")[2] for r in python_roots() if r.startswith("/tmp/")})
FIND_TRACES = (
    "import builtins, os\n"
    "here = os.getcwd()\n"
    f"bound = {_BOUND_IN_TMP!r}\n"
    "assert [e for e in os.listdir('/tmp')\n"
    "        if not here.startswith('/tmp/' + e) and e not in bound] == []\n"
    "assert os.listdir('/dev/shm') == [] and os.listdir('..') == [os.path.basename(here)]\n"
    "assert sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == [1, os.getpid()]\n"
    "assert not hasattr(builtins, 'planted') and 'PLANTED' not in os.environ\n"
)


def test_zygote_leaves_nothing_from_one_execution_to_the_next(zygote: None) -> None:
    planted = run_python(LEAVE_TRACES, "pass")
    assert planted.passed, planted.reason
    infra = sandbox.zygote_pids()
    after = run_python("", FIND_TRACES)
    assert after.passed, after.reason
    assert sandbox.zygote_pids() == infra


@pytest.mark.parametrize(
    "attack",
    [
        case("sigkill", "os.kill(1, signal.SIGKILL)"),
        case("sigterm", "os.kill(1, signal.SIGTERM)"),
        case("sigint", "os.kill(1, signal.SIGINT)"),
        case("sigstop", "os.kill(1, signal.SIGSTOP)"),
        case("kill-all", "os.kill(-1, signal.SIGKILL)"),
        case("write-memory", "open('/proc/1/mem', 'r+b').write(b'x')"),
        case("read-environ", "open('/proc/1/environ', 'rb').read()"),
        case(
            "ptrace",
            "import ctypes\n"
            "assert ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0) == 0, 'ptrace refused'",
        ),
    ],
)
def test_zygote_survives_code_aimed_at_it(zygote: None, attack: str) -> None:
    run_python("x = 1", "assert x == 1")
    infra = sandbox.zygote_pids()
    code = f"import os, signal, time\ntry:\n    {attack.replace(chr(10), chr(10) + '    ')}\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
    result = run_python(code + "time.sleep(0.1)\n", "pass")
    assert result.passed, result.reason
    assert run_python("x = 1", "assert x == 1").passed
    assert sandbox.zygote_pids() == infra, "the zygote was replaced: the attack reached it"


def test_zygote_is_replaced_after_a_timeout(zygote: None) -> None:
    run_python("x = 1", "assert x == 1")
    infra = sandbox.zygote_pids()
    assert run_python("while True:\n    pass\n", "pass", timeout_s=0.5).timed_out
    assert not any(alive(pid, wait_s=5) for pid in infra)
    assert run_python("x = 1", "assert x == 1").passed
    assert set(sandbox.zygote_pids()).isdisjoint(infra)


def test_one_shot_launch_when_zygotes_are_off(
    zygote: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox.ENV_ZYGOTE, "0")
    result = run_python("import os\nprint(os.getppid())", "pass")
    assert result.passed, result.reason
    assert sandbox.zygote_pids() == []


def test_a_zygote_killed_while_idle_is_replaced_without_failing_a_run(zygote: None) -> None:
    run_python("x = 1", "assert x == 1")
    infra = sandbox.zygote_pids()
    for pid in infra:
        os.kill(pid, 9)
    time.sleep(0.2)
    result = run_python("x = 1", "assert x == 1")
    assert result.passed, result.reason
    assert set(sandbox.zygote_pids()).isdisjoint(infra)


def test_idle_zygotes_are_closed(zygote: None) -> None:
    run_python("x = 1", "assert x == 1")
    infra = sandbox.zygote_pids()
    assert infra
    deadline = time.monotonic() + 10
    while sandbox.zygote_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sandbox.zygote_pids() == []
    assert not any(alive(pid, wait_s=5) for pid in infra)
