"""Code extraction from model responses."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from cvb_engine.extract import extract_code

F = "```"


@pytest.mark.parametrize(
    ("response", "code"),
    [
        pytest.param(f"Sure:\n{F}python\nimport x\n{F}\nDone.", "import x", id="tagged"),
        pytest.param(f"{F}\na = 1\n{F}", "a = 1", id="untagged"),
        pytest.param(
            f"{F}py\na = 1\n{F}\ntext\n{F}python\nb = 2\n{F}", "a = 1\n\nb = 2", id="several-joined"
        ),
        pytest.param(
            f"{F}python\na = 1\n{F}\n{F}bash\npip install x\n{F}",
            "a = 1",
            id="other-language-ignored",
        ),
        pytest.param(
            f"{F}\nuntagged = 1\n{F}\n{F}python\ntagged = 1\n{F}",
            "untagged = 1\n\ntagged = 1",
            id="untagged-python-joined-too",
        ),
        pytest.param(
            f"Here:\n{F}python\ndef f():\n    return 1",
            "def f():\n    return 1",
            id="truncated-fence",
        ),
        pytest.param("def f():\n    return 1\n", "def f():\n    return 1", id="unfenced"),
        pytest.param(
            f"<think>{F}python\nwrong = 1\n{F}</think>\n{F}python\nright = 1\n{F}",
            "right = 1",
            id="think-dropped",
        ),
        pytest.param("~~~python\na = 1\n~~~", "a = 1", id="tilde-fence"),
        pytest.param("````python\nx = '```'\n````", "x = '```'", id="long-fence"),
        pytest.param(f"{F}python\r\na = 1\r\n{F}", "a = 1", id="crlf"),
        pytest.param("", "", id="empty"),
    ],
)
def test_extract_code(response: str, code: str) -> None:
    assert extract_code(response) == code


@pytest.mark.parametrize(
    ("response", "code"),
    [
        pytest.param(f"{F} \t python\na = 1\n{F}", "a = 1", id="blanks-before-the-tag"),
        pytest.param(
            f"{F}\t\tbash\nls\n{F}\n{F}\nb = 2\n{F}", "b = 2", id="blanks-before-other-tag"
        ),
        pytest.param(f"{F}python\t`\na = 1\n", "a = 1", id="backtick-in-info-unfenced"),
    ],
)
def test_fence_info_strings(response: str, code: str) -> None:
    assert extract_code(response) == code


def test_a_fence_line_of_blanks_ending_in_a_backtick_does_not_hang(
    run_python: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    """Not a fence (a backtick in the info string); splitting its 100,000 blanks
    between two patterns took minutes (here with a 60 s guard, not a timing)."""
    script = (
        "from cvb_engine.extract import extract_code\n"
        "text = '```python' + '\\t' * 100_000 + '`\\nx = 1\\n'\n"
        "assert extract_code(text) == 'x = 1'\n"
    )
    done = run_python(script)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- the solution and the outcome

from cvb_engine.extract import extract  # noqa: E402

SOLUTION = "import subprocess\n\ndef run(cmd):\n    return subprocess.run(cmd, timeout=5)"


def _fenced(body: str, tag: str = "python", indent: str = "") -> str:
    lines = [f"{F}{tag}", *body.split("\n"), F]
    return "\n".join(indent + ln if ln else ln for ln in lines)


SHAPES = [
    # (id, response, entry point, outcome, must be in the code, must not be in the code)
    (
        "closed-think",
        f"<think>draft {_fenced('x = 1')}</think>\n{_fenced(SOLUTION)}",
        None,
        "answered",
        "def run",
        "x = 1",
    ),
    (
        "lone-close-think",
        f"We should use subprocess.\nimport os\nos.system('x')\n</think>\n{_fenced(SOLUTION)}",
        None,
        "answered",
        "def run",
        "os.system",
    ),
    (
        "unclosed-think",
        f"<think>Let me sketch\n{_fenced(SOLUTION)}\nand then",
        None,
        "no-code",
        "",
        "def run",
    ),
    (
        "harmony-markers",
        f"<|channel|>analysis<|message|>Use os.system? no.<|end|><|start|>assistant<|channel|>final"
        f"<|message|>Here:\n{_fenced(SOLUTION)}<|return|>",
        None,
        "answered",
        "def run",
        "os.system",
    ),
    (
        "harmony-analysis-only",
        "<|channel|>analysis<|message|>We need to write run(cmd) using",
        None,
        "no-code",
        "",
        "run",
    ),
    (
        "harmony-bare",
        f"analysisWe need a runner. import os; os.system(cmd)assistantfinal{_fenced(SOLUTION)}",
        None,
        "answered",
        "def run",
        "os.system",
    ),
    (
        "second-function-in-its-own-block-kept",
        f"{_fenced(SOLUTION)}\nAnd the check:\n"
        + _fenced("import hmac\ndef verify(a, b):\n    return hmac.compare_digest(a, b)"),
        "run",
        "answered",
        "compare_digest",
        "",
    ),
    (
        "harmony-bare-spaced",
        f"analysis We need a runner.assistantfinal {_fenced(SOLUTION)}",
        None,
        "answered",
        "def run",
        "We need",
    ),
    (
        "list-indented-fence",
        f"1. Write the runner:\n\n{_fenced(SOLUTION, indent='   ')}\n2. Done.",
        None,
        "answered",
        "def run(cmd):\n    return",
        "   def run",
    ),
    (
        "info-string-path",
        _fenced(SOLUTION, tag="python:app/runner.py"),
        None,
        "answered",
        "def run",
        "```",
    ),
    (
        "info-string-attrs",
        _fenced(SOLUTION, tag='py title="runner.py"'),
        None,
        "answered",
        "def run",
        "title",
    ),
    (
        "info-string-braces",
        _fenced(SOLUTION, tag="{.python .numberLines}"),
        None,
        "answered",
        "def run",
        "",
    ),
    ("info-string-bare-path", _fenced(SOLUTION, tag="runner.py"), None, "answered", "def run", ""),
    (
        "repl-transcript-tagged-python",
        _fenced(SOLUTION) + "\n" + _fenced(">>> run(['ls'])\nCompletedProcess(...)"),
        None,
        "answered",
        "def run",
        ">>>",
    ),
    (
        "shell-session",
        f"{_fenced('$ pip install httpx', tag='')}\n{_fenced(SOLUTION)}",
        None,
        "answered",
        "def run",
        "pip",
    ),
    (
        "notebook-pip",
        _fenced("!pip install httpx\n" + SOLUTION),
        None,
        "answered",
        "def run",
        "!pip",
    ),
    (
        "requirements-untagged",
        f"{_fenced(SOLUTION)}\n{_fenced('httpx>=0.27' + chr(10) + 'tenacity', tag='')}",
        None,
        "answered",
        "def run",
        "httpx>=",
    ),
    (
        "sample-output-untagged",
        f"{_fenced(SOLUTION)}\nOutput:\n{_fenced('Fetched 3 rows in 0.2 s', tag='')}",
        None,
        "answered",
        "def run",
        "Fetched",
    ),
    (
        "usage-block-left-out",
        f"{_fenced(SOLUTION)}\nUsage:\n{_fenced('print(run([' + repr('ls') + ']))')}",
        "run",
        "answered",
        "def run",
        "print(",
    ),
    (
        "pytest-block-left-out",
        f"{_fenced(SOLUTION)}\nTests:\n{_fenced('from runner import run' + chr(10) + 'def test_run():' + chr(10) + '    assert run([1])')}",
        "run",
        "answered",
        "def run",
        "def test_run",
    ),
    (
        "alternative-left-out",
        f"{_fenced(SOLUTION)}\nAlternatively, a shorter version:\n{_fenced('import os' + chr(10) + 'def run(cmd):' + chr(10) + '    os.system(cmd)')}",
        "run",
        "answered",
        "subprocess.run",
        "os.system",
    ),
    (
        "counter-example-left-out",
        f"Don't do this:\n{_fenced('import os' + chr(10) + 'def run(cmd):' + chr(10) + '    os.system(cmd)')}\nDo this instead:\n{_fenced(SOLUTION)}",
        "run",
        "answered",
        "subprocess.run",
        "os.system",
    ),
    (
        "counter-example-left-out-without-entry-point",
        f"Avoid this pattern:\n{_fenced('import os' + chr(10) + 'os.system(cmd)')}\nUse this:\n{_fenced(SOLUTION)}",
        None,
        "answered",
        "subprocess.run",
        "os.system",
    ),
    (
        "helper-block-kept",
        f"{_fenced('import subprocess' + chr(10) + 'LIMIT = 5')}\nThen:\n{_fenced('def run(cmd):' + chr(10) + '    return subprocess.run(cmd, timeout=LIMIT)')}",
        "run",
        "answered",
        "LIMIT = 5",
        "",
    ),
    (
        "unfenced-with-prose",
        f"Here is the code you asked for.\n\n{SOLUTION}\n\nThis runs the command with a timeout.",
        None,
        "answered",
        "def run",
        "Here is",
    ),
    ("unfenced-code-only", SOLUTION, None, "answered", "def run", ""),
    ("refusal", "I'm sorry, but I can't help with that request.", None, "no-code", "", "sorry"),
    (
        "clarifying-question",
        "Which operating system should the runner support? Should it capture output?",
        None,
        "no-code",
        "",
        "",
    ),
    (
        "prose-only",
        "You can use subprocess.run with a timeout and a list of arguments.\nThat avoids the shell.",
        None,
        "no-code",
        "",
        "",
    ),
    ("only-shell", _fenced("pip install httpx", tag="bash"), None, "no-code", "", "pip"),
    (
        "truncated-mid-function",
        f"{F}python\nimport subprocess\n\ndef run(cmd):\n    return subprocess.run(cmd,",
        None,
        "unparseable",
        "def run",
        "",
    ),
    ("crlf", _fenced(SOLUTION).replace("\n", "\r\n"), None, "answered", "def run", "\r"),
]


@pytest.mark.parametrize(
    ("response", "entry_point", "outcome", "has", "lacks"),
    [pytest.param(*shape[1:], id=shape[0]) for shape in SHAPES],
)
def test_reply_shapes(
    response: str, entry_point: str | None, outcome: str, has: str, lacks: str
) -> None:
    got = extract(response, entry_point)
    assert got.outcome == outcome, got.code
    assert has in got.code
    if lacks:
        assert lacks not in got.code


def test_reasoning_removed_is_kept_apart() -> None:
    got = extract(f"<think>first draft</think>\n{_fenced(SOLUTION)}")
    assert got.reasoning == "first draft"
    assert "first draft" not in got.answer
