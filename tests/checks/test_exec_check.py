"""Tests of the ``exec`` check kind: parameters, verdicts, and a table of hostile solutions.

Every solution runs through ``cvb_engine.scoring.run_check`` — the path scoring
takes — on each sandbox backend that works here. What a backend cannot
isolate is marked ``xfail(strict=True)`` with the reason, so the limits of each
backend are stated by tests that would start failing if they changed.
"""

from __future__ import annotations

import contextlib
import os
import site
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from proc_scan import processes_with
from pydantic import ValidationError

from cvb_engine import sandbox
from cvb_engine.checks import get_kind
from cvb_engine.checks.base import CheckResult, Span, Subject
from cvb_engine.checks.exec_check import Params, run_exec
from cvb_engine.scoring import run_check


def case(id_: str, *values: Any, marks: Any = ()) -> Any:
    return pytest.param(*values, id=id_, marks=marks)


def check(code: str, test: str, **params: Any) -> CheckResult:
    """Run one exec check the way scoring does, parameters given as in YAML."""
    return run_check("exec", Params.model_validate({"test": test, **params}), Subject(code))


@pytest.fixture(params=sandbox.BACKENDS)
def backend_name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    problem = sandbox.self_test(name)
    if problem is not None:
        pytest.skip(f"{name} does not work here: {problem}")
    monkeypatch.setenv(sandbox.ENV_BACKEND, name)
    return name


# --- parameters ------------------------------------------------------------------

PARAMS_OK = [
    case("minimal", {"test": "assert f() == 1"}, 5.0),
    case("timeout", {"test": "assert f() == 1", "timeout_s": 0.5}, 0.5),
    case("max-timeout", {"test": "pass", "timeout_s": 60}, 60.0),
    case("multi-line", {"test": "def check(f):\n    assert f(1) == 2\ncheck(inc)\n"}, 5.0),
]


@pytest.mark.parametrize(("raw", "timeout_s"), PARAMS_OK)
def test_params_accepted(raw: dict[str, Any], timeout_s: float) -> None:
    assert Params.model_validate(raw).timeout_s == timeout_s


PARAMS_BAD = [
    case("missing-test", {}, "test"),
    case("empty-test", {"test": "  \n"}, "test is empty"),
    case("not-compiling", {"test": "assert (f(1) == 2"}, "test does not compile"),
    case("bad-indent", {"test": "  assert True\nassert False"}, "test does not compile"),
    case("nul-byte", {"test": "assert 1\0"}, "test does not compile"),
    case("zero-timeout", {"test": "pass", "timeout_s": 0}, "greater than 0"),
    case("timeout-too-long", {"test": "pass", "timeout_s": 61}, "less than or equal to 60"),
    case("unknown-field", {"test": "pass", "tests": "pass"}, "Extra inputs"),
]


@pytest.mark.parametrize(("raw", "message"), PARAMS_BAD)
def test_params_rejected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Params.model_validate(raw)


def test_validation_compiles_but_never_runs_the_test(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    Params.model_validate({"test": f"open({str(marker)!r}, 'w').write('x')"})
    assert not marker.exists()


def test_registered_as_a_kind_that_executes_code() -> None:
    kind = get_kind("exec")
    assert kind is not None and kind.executes_code
    assert kind.params is Params and kind.run is run_exec


# --- verdicts --------------------------------------------------------------------

VERDICTS = [
    case(
        "passes",
        "def add(a, b):\n    return a + b\n",
        "assert add(2, 3) == 5",
        True,
        "passed (",
        (),
    ),
    case(
        "wrong-answer",
        "def add(a, b):\n    return a - b\n",
        "assert add(2, 3) == 5",
        False,
        "AssertionError at test line 1: assert add(2, 3) == 5",
        (),
    ),
    case(
        "raises-in-solution",
        "def add(a, b):\n    if a > 1:\n        raise ValueError('too big')\n    return a + b\n",
        "assert add(1, 1) == 2\nassert add(2, 3) == 5",
        False,
        "ValueError: too big at solution line 3: raise ValueError('too big') "
        "(called from test line 2: assert add(2, 3) == 5)",
        (Span(3, 8, 27),),
    ),
    case(
        "solution-does-not-parse",
        "def add(a, b)\n    return a + b\n",
        "assert add(2, 3) == 5",
        False,
        "solution does not compile: SyntaxError: expected ':' at solution line 1: def add(a, b)",
        (Span(1, 0, 13),),
    ),
    case(
        "empty-code",
        "",
        "assert add(2, 3) == 5",
        False,
        "NameError: name 'add' is not defined at test line 1: assert add(2, 3) == 5",
        (),
    ),
]


@pytest.mark.parametrize(("code", "test", "passed", "reason", "evidence"), VERDICTS)
def test_verdicts(
    code: str, test: str, passed: bool, reason: str, evidence: tuple[Span, ...]
) -> None:
    result = check(code, test)
    assert result.passed is passed
    assert result.reason.startswith(reason), result.reason
    assert result.evidence == evidence
    assert result.scope == "code" and not result.timed_out


def test_timeout_is_flagged() -> None:
    result = check("import time\ntime.sleep(10)\n", "pass", timeout_s=0.5)
    assert (result.passed, result.timed_out, result.reason) == (False, True, "timed out after 0.5s")


def test_same_test_runs_once_per_subject(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = sandbox.run_python

    def counting(code: str, test: str, **kwargs: Any) -> sandbox.ExecResult:
        calls.append(test)
        return real(code, test, **kwargs)

    monkeypatch.setattr(sandbox, "run_python", counting)
    subject = Subject("x = 1")
    params = Params(test="assert x == 1")
    assert run_exec(params, subject).passed and run_exec(params, subject).passed
    assert run_exec(Params(test="assert x == 2"), subject).passed is False
    assert calls == ["assert x == 1", "assert x == 2"]


def test_a_broken_sandbox_is_a_failed_check_not_an_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(sandbox.ENV_BACKEND, "no-such-backend")
    result = check("x = 1", "assert x == 1")
    assert not result.passed
    assert result.reason.startswith("sandbox unavailable: CVB_SANDBOX='no-such-backend'")


# --- honest solutions on every backend, with their timing ------------------------

HONEST = [
    case("arithmetic", "def add(a, b):\n    return a + b\n", "assert add(2, 3) == 5"),
    case(
        "recursion-and-stdlib",
        "import functools, re, collections\n"
        "@functools.lru_cache(None)\n"
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def words(s):\n    return collections.Counter(re.findall(r'\\w+', s))\n",
        "assert fib(80) == 23416728348467685\nassert words('a b a')['a'] == 2",
    ),
    case(
        "humaneval-check-style",
        "def has_close_elements(numbers, threshold):\n"
        "    return any(abs(a - b) < threshold\n"
        "               for i, a in enumerate(numbers) for b in numbers[i + 1:])\n",
        "def check(candidate):\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)\n"
        "    assert not candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8)\n"
        "check(has_close_elements)\n",
    ),
    case(
        "files-in-its-own-directory",
        "import json, pathlib, tempfile\n"
        "def roundtrip(obj):\n"
        "    p = pathlib.Path('data.json')\n"
        "    p.write_text(json.dumps(obj))\n"
        "    with tempfile.NamedTemporaryFile('w') as t:\n"
        "        t.write('x')\n"
        "    return json.loads(p.read_text())\n",
        "assert roundtrip({'a': [1, 2]}) == {'a': [1, 2]}",
    ),
    case(
        "threads-and-a-subprocess",
        "import subprocess, sys\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "def squares(n):\n"
        "    with ThreadPoolExecutor(4) as pool:\n"
        "        return list(pool.map(lambda x: x * x, range(n)))\n"
        "def child_says():\n"
        "    return subprocess.run([sys.executable, '-c', 'print(42)'],\n"
        "                          capture_output=True, text=True).stdout.strip()\n",
        "assert squares(4) == [0, 1, 4, 9]\nassert child_says() == '42'",
    ),
    case(
        "dataclass-and-main-guard",
        "from dataclasses import dataclass\n"
        "@dataclass\nclass P:\n    x: int\n"
        "if __name__ == '__main__':\n    raise SystemExit('demo block must not run')\n",
        "assert P(1) == P(1)",
    ),
]


@pytest.mark.parametrize(("code", "test"), HONEST)
def test_honest_solutions_pass(
    backend_name: str, code: str, test: str, record_property: Any
) -> None:
    started = time.monotonic()
    result = check(code, test)
    record_property("seconds", round(time.monotonic() - started, 3))
    assert result.passed, result.reason
    assert result.reason.startswith("passed (") and result.reason.endswith("s)")


# --- hostile solutions -----------------------------------------------------------
#
# Every hostile solution meets the same test, ``assert add(2, 3) == 5``, and
# never defines an honest ``add``: a pass would be a sandbox failure. Placeholders
# in the code: OUTSIDE (a folder of the test's tmp_path, outside the sandbox's
# temporary directory), MARKER (a token in every command line the test must
# not find alive afterwards), PORT (a listener of the test on 127.0.0.1).

HOSTILE_TEST = "assert add(2, 3) == 5"
# Cases that end by timing out get 1 s; the others get room for a loaded machine.
TIMEOUT_S = {True: 1.0, False: 3.0}
#: Every site-packages folder of this interpreter (a venv's and its base's).
SITE_DIRS = tuple(
    sorted(
        {
            *site.getsitepackages(),
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})[
                "purelib"
            ],
        }
    )
)
HOST_PROCESS_NAME = f"cvbhostproc{os.getpid()}"
PROJECT_FILES = [str(Path(__file__).resolve()), str(Path(sandbox.__file__).resolve())]
ROOT_CAN_RAISE_LIMITS = False
try:
    for _line in Path("/proc/self/status").read_text().splitlines():
        if _line.startswith("CapEff:"):
            ROOT_CAN_RAISE_LIMITS = bool(int(_line.split()[1], 16) & (1 << 24))  # CAP_SYS_RESOURCE
except OSError:
    pass


@dataclass(frozen=True)
class Hostile:
    code: str
    # substring of the failure reason; None when several outcomes are acceptable
    reason: str | None = None
    timed_out: bool = False
    # backend -> why it cannot defend (strict xfail) / why the case must not run (skip)
    xfail: dict[str, str] = field(default_factory=dict)
    skip: dict[str, str] = field(default_factory=dict)
    needs_task_limit: bool = False


NO_FS = "runs as the caller on the real file system: the write or delete goes through"
# Harm that outlives the test (a .pth runs at every later Python start): never
# tried where the backend is known not to stop it.
PERSISTS = "runs as the caller on the real file system: would plant code in site-packages"
NO_PROC = "no PID namespace: the host's processes and their environments are visible"
ESCAPE_DIRS = ("/tmp", "/dev/shm", "/var/tmp", "/root")
HOSTILE: dict[str, Hostile] = {
    "write-shared-tmp": Hostile(
        "for d in ('/tmp', '/dev/shm', '/var/tmp'):\n"
        "    try:\n"
        "        open(d + '/MARKER-escape', 'w').write('escaped')\n"
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "write-home": Hostile(
        "import os\n"
        "for d in (os.path.expanduser('~root'), '/root', os.environ.get('HOME', '/')):\n"
        "    try:\n"
        "        open(os.path.join(d, 'MARKER-escape'), 'w').write('escaped')\n"
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "plant-pth": Hostile(
        "import os, site, sys, sysconfig\n"
        "dirs = set(site.getsitepackages()) | {sysconfig.get_paths()['purelib']}\n"
        "dirs |= {p for p in sys.path if p.endswith('site-packages')}\n"
        "for d in SITE_DIRS + sorted(dirs):\n"
        "    try:\n"
        "        open(os.path.join(d, 'MARKER-escape.pth'), 'w').write(\n"
        '            \'import os; open("/tmp/MARKER-pwned", "w")\\n\')\n'
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
        skip={"unshare": PERSISTS, "plain": PERSISTS},
    ),
    "chmod-outside": Hostile(
        "import os\nos.chmod('OUTSIDE/existing.txt', 0o777)\ndef add(a, b):\n    return 0\n",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "delete-beside-workdir": Hostile(
        "import os\nos.remove('../sibling.txt')\ndef add(a, b):\n    return 0\n",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "read-host-environment": Hostile(
        "import os\n"
        "SEEN = 'cvb-canary' in str(os.environ)\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        SEEN = SEEN or b'cvb-canary' in open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except (OSError, ValueError):\n"
        "        pass\n"
        "def add(a, b):\n    return a + b if SEEN else -1\n",
        "AssertionError at test line 1",
        # The canary is set at run time, so /proc/PID/environ (the environment a
        # process started with) never shows it: the case proves nothing on plain.
        skip={"plain": NO_PROC},
    ),
    "read-host-process-list": Hostile(
        "import os\n"
        "FOUND = False\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        FOUND = FOUND or b'HOSTPROC' in open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n    return a + b if FOUND else -1\n",
        "AssertionError at test line 1",
        xfail={"plain": NO_PROC},
    ),
    "read-project-source": Hostile(
        "import os\n"
        "FOUND = any(os.path.exists(p) for p in PROJECT_FILES)\n"
        "def add(a, b):\n    return a + b if FOUND else -1\n",
        "AssertionError at test line 1",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "fork-bomb": Hostile(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        timed_out=True,
        needs_task_limit=True,
    ),
    "memory-bomb": Hostile("x = bytearray(16 * 1024**3)\n", "MemoryError (memory limit reached)"),
    "infinite-loop": Hostile("while True:\n    pass\n", timed_out=True),
    "c-level-loop": Hostile(
        "import collections, itertools\ncollections.deque(itertools.repeat(1), maxlen=0)\n",
        timed_out=True,
    ),
    "long-sleep": Hostile("import time\ntime.sleep(3600)\n", timed_out=True),
    "deep-recursion": Hostile(
        "def add(a, b):\n    return add(a, b)\n", "RecursionError: maximum recursion depth"
    ),
    "c-stack-overflow": Hostile(
        "import sys\nsys.setrecursionlimit(10**6)\nx, y = [], []\nfor _ in range(10**5):\n"
        "    x, y = [x], [y]\nx == y\n",
        "killed by SIGSEGV",
    ),
    "write-outside": Hostile(
        "open('OUTSIDE/new.txt', 'w').write('escaped')\n"
        "open('OUTSIDE/existing.txt', 'w').write('overwritten')\n",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "delete-outside": Hostile(
        "import os, shutil\nos.remove('OUTSIDE/existing.txt')\n",
        xfail={"unshare": NO_FS, "plain": NO_FS},
    ),
    "env-api-key": Hostile(
        "import os\nKEY = os.environ.get('OPENAI_API_KEY')\n"
        "def add(a, b):\n    return 5 if KEY == 'sk-test-fake' else -1\n",
        "AssertionError at test line 1",
    ),
    "network-localhost": Hostile(
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', PORT), timeout=0.5).sendall(b'leak')\n"
        "    CONNECTED = True\n"
        "except OSError:\n"
        "    CONNECTED = False\n"
        "def add(a, b):\n    return a + b if CONNECTED else -1\n",
        "AssertionError at test line 1",
        xfail={"plain": "no network namespace: 127.0.0.1 of the host is reachable"},
    ),
    "kill-parent": Hostile("import os\nos.kill(os.getppid(), 9)\nimport time\ntime.sleep(0.2)\n"),
    "kill-everything": Hostile(
        "import os\nos.kill(-1, 9)\n",
        skip={"plain": "no PID namespace: kill(-1) as root would kill every process here"},
    ),
    "os-exit-0": Hostile("import os\nos._exit(0)\n", "exited with status 0"),
    "sys-exit-0": Hostile("import sys\nsys.exit(0)\n", "solution raised SystemExit: 0"),
    "system-exit-in-test": Hostile(
        "def add(a, b):\n    raise SystemExit(0)\n", "SystemExit: 0 at solution line 2"
    ),
    "os-exit-in-test": Hostile(
        "import os\ndef add(a, b):\n    os._exit(0)\n", "exited with status 0 during the test"
    ),
    "keyboard-interrupt": Hostile("raise KeyboardInterrupt\n", "solution raised KeyboardInterrupt"),
    "output-200mb": Hostile(
        "import sys\nsys.stdout.write('x' * 200_000_000)\n", "output limit exceeded"
    ),
    "daemon-grandchild": Hostile(
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv(sys.executable, [sys.executable, '-c',\n"
        '            \'import time; time.sleep(1); open("OUTSIDE/late.txt", "w").write("x")\',\n'
        "            'MARKER'])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
    ),
    "sigterm-ignored": Hostile(
        "import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nos.fork()\n"
        "while True:\n    pass\n",
        timed_out=True,
    ),
    "close-stdout-stderr": Hostile(
        "import os, sys\nos.close(1)\nos.close(2)\nsys.stdout.close()\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
    ),
    "close-every-descriptor": Hostile(
        "import os\nos.closerange(0, 1 << 16)\ndef add(a, b):\n    return a + b\n",
        "without a verdict",
    ),
    "signal-alarm": Hostile(
        "import os, signal, time\n"
        "signal.signal(signal.SIGALRM, lambda *_: os._exit(0))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.2)\n"
        "def add(a, b):\n    time.sleep(5)\n",
        "exited with status 0 during the test",
    ),
    "overwrite-builtins": Hostile(
        "import builtins\n"
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
        "builtins.BaseException = type('Nothing', (), {})\n"
        "builtins.exec = builtins.compile = lambda *a, **k: None\n"
        "builtins.isinstance = lambda *a: True\n"
        "builtins.str = lambda *a: 'PASS'\n"
        "__builtins__ = {}\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
    ),
    "monkeypatch-harness": Hostile(
        "import os, sys, json\n"
        "sys.modules['__main__'].__dict__.clear()\n"
        "os.write = lambda fd, data: len(data)\n"
        "os._exit = lambda code: None\n"
        "json.dumps = lambda *a, **k: '{\"passed\": true}'\n"
        "try:\n"
        "    import cvb_engine.sandbox.channel as sb\n"
        "    sb.parse_results = lambda *a: None\n"
        "except ImportError:\n"
        "    pass\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
    ),
    "forge-verdict": Hostile(
        "import os\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.write(fd, b'\\nPASS\\n' + os.urandom(16).hex().encode() + b' PASS\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n",
        "exited with status 0",
    ),
    "peek-hidden-test": Hostile(
        "import glob, re\n"
        "SRC = ''.join(open(p).read() for p in glob.glob('.*') + glob.glob('*'))\n"
        "def add(a, b):\n"
        "    m = re.search(r'== (\\d+)', SRC)\n"
        "    return int(m.group(1)) if m else -1\n",
        "AssertionError at test line 1",
    ),
    "spawn-shell": Hostile(
        "import subprocess\n"
        "subprocess.Popen(['/bin/sh', '-c', 'while true; do sleep 1; done # MARKER'],\n"
        "                 start_new_session=True)\n"
        "subprocess.run('exit 0', shell=True)\n"
        "def add(a, b):\n    return 0\n",
        "AssertionError at test line 1",
    ),
    "fill-disk": Hostile(
        "with open('big.bin', 'wb') as f:\n    for _ in range(1024):\n        f.write(b'0' * (1 << 20))\n",
        "File too large",
    ),
    "raise-rlimits": Hostile(
        "import resource\n"
        "inf = resource.RLIM_INFINITY\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (inf, inf))\n"
        "    big = bytearray(2 * 1024**3)\n"
        "    RAISED = True\n"
        "except (ValueError, OSError, MemoryError):\n"
        "    RAISED = False\n"
        "def add(a, b):\n    return a + b if RAISED else -1\n",
        "AssertionError at test line 1",
        xfail={
            name: "root with CAP_SYS_RESOURCE outside a user namespace can raise its limits"
            for name in ("unshare", "plain")
            if ROOT_CAN_RAISE_LIMITS
        },
    ),
}


def _hostile_params() -> list[Any]:
    params = []
    for variant in VARIANTS:
        backend = variant.split("-")[0]
        for name, hostile in HOSTILE.items():
            marks: list[Any] = []
            if backend in hostile.skip:
                marks.append(pytest.mark.skip(reason=hostile.skip[backend]))
            if backend in hostile.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=hostile.xfail[backend]))
            params.append(pytest.param(variant, hostile, id=f"{variant}-{name}", marks=marks))
    return params


# bwrap serves executions from a pre-started zygote; "bwrap-oneshot" is the
# launch per execution it falls back to, and must defend as well.
VARIANTS = {
    "bwrap": {},
    "bwrap-oneshot": {sandbox.ENV_ZYGOTE: "0"},
    "unshare": {},
    "plain": {},
}


@dataclass
class Arena:
    """What a hostile run could damage, and how to tell."""

    outside: Path
    workroot: Path
    marker: str
    listener: socket.socket

    def snapshot(self) -> dict[str, tuple[str, int]]:
        files = sorted([*self.outside.iterdir(), *self.workroot.glob("sibling.txt")])
        return {str(p): (p.read_text(), p.stat().st_mode) for p in files}

    def escapes(self) -> list[str]:
        """Files the solution left where it must not reach: shared temporary
        folders, root's home, and every site-packages folder of this interpreter."""
        found = []
        for top in (*ESCAPE_DIRS, *SITE_DIRS):
            with contextlib.suppress(OSError):
                found += [os.path.join(top, e) for e in os.listdir(top) if self.marker in e]
        return found

    def leftovers(self, wait_s: float = 1.0) -> list[str]:
        # an idle zygote carries the marker too (its root is in the workroot): it is
        # the sandbox, not something the solution left behind
        return processes_with(self.marker, wait_s, exclude=sandbox.zygote_pids())

    def connections(self) -> int:
        count = 0
        self.listener.setblocking(False)
        while True:
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1


@pytest.fixture
def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Arena]:
    marker = f"cvbhostile{os.getpid()}x{time.monotonic_ns()}"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "existing.txt").write_text("original")
    # The sandbox's temporary directories go under a folder named after the
    # marker, so the harness and every fork of it carry the marker in argv.
    workroot = tmp_path / marker
    workroot.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(workroot))
    (workroot / "sibling.txt").write_text("beside the work folder")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
    monkeypatch.setenv("CVB_TEST_CANARY", "cvb-canary")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    # A process of the host's, for code that goes looking (its name is not the marker:
    # it is no leftover of the solution's).
    host_proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", HOST_PROCESS_NAME],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    arena = Arena(outside, workroot, marker, listener)
    try:
        yield arena
    finally:
        host_proc.kill()
        host_proc.wait()
        sandbox.shutdown()
        listener.close()
        for path in arena.escapes():  # what a weaker backend let through (xfail cases)
            with contextlib.suppress(OSError):
                os.remove(path)


@pytest.mark.parametrize(("variant", "hostile"), _hostile_params())
def test_hostile_solution_fails_and_harms_nothing(
    variant: str, hostile: Hostile, arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = variant.split("-")[0]
    for name, value in VARIANTS[variant].items():
        monkeypatch.setenv(name, value)
    problem = sandbox.self_test(backend)
    if problem is not None:
        pytest.skip(f"{backend} does not work here: {problem}")
    if hostile.needs_task_limit and sandbox.info(backend).task_limit is None:
        pytest.skip("no pids cgroup here: nothing bounds the number of processes of root")
    monkeypatch.setenv(sandbox.ENV_BACKEND, backend)
    code = (
        hostile.code.replace("OUTSIDE", str(arena.outside))
        .replace("MARKER", arena.marker)
        .replace("PORT", str(arena.listener.getsockname()[1]))
        .replace("SITE_DIRS", repr(list(SITE_DIRS)))
        .replace("PROJECT_FILES", repr(PROJECT_FILES))
        .replace("HOSTPROC", HOST_PROCESS_NAME)
    )
    before = arena.snapshot()

    result = check(code, HOSTILE_TEST, timeout_s=TIMEOUT_S[hostile.timed_out])

    assert not result.passed, result.reason
    assert result.reason
    if hostile.reason is not None:
        assert hostile.reason in result.reason, result.reason
    assert result.timed_out is hostile.timed_out, result.reason
    assert arena.leftovers() == []
    assert not list(arena.workroot.rglob("cvb-sbx-*")), "the temporary directory was not removed"
    assert arena.connections() == 0, "the solution reached a listener on 127.0.0.1"
    if "late.txt" in hostile.code:
        time.sleep(1.3)  # the daemon, had it survived, would have written by now
    assert arena.snapshot() == before
    assert arena.escapes() == [], "the solution wrote outside its sandbox"
    # the harness (this process) is alive and the sandbox still works
    assert check("def add(a, b):\n    return a + b\n", HOSTILE_TEST).passed
