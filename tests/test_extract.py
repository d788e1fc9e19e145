"""Code extraction from model responses."""

from __future__ import annotations

import ast
import json
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

from cvb_engine.extract import extract, sanitize  # noqa: E402

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


# --- block shapes, third pass: one row per shape (README: Extraction) ---------------

CSHARP = (
    "using System;\nnamespace Demo\n{\n    class Program\n    {\n"
    "        static void Main(string[] args)\n        {\n"
    '            Console.WriteLine("hi");\n        }\n    }\n}'
)
JS = "function add(a, b) {\n  const s = a + b;\n  console.log(s);\n  return s;\n}"
# short enough that its one ``return ...;`` line once outweighed the rest as Python's
JS_SHORT = (
    "async function statuses(urls) {\n"
    "  const r = await Promise.all(urls.map((u) => fetch(u)));\n"
    "  return r.map((x) => x.status);\n}"
)
SQL_TEXT = "SELECT id, email\nFROM users\nWHERE email = ?;"
JSON_CODE = '{"code": "import os\\n\\ndef home():\\n    return os.path.expanduser(\\"~\\")\\n"}'
SETTINGS = (
    "from pydantic_settings import BaseSettings\n\nclass Settings(BaseSettings):\n"
    "    slack_webhooks: dict[str, str] = {}\n\nsettings = Settings()"
)
NOTIFY = (
    "import requests\nfrom app.settings import settings\n\n"
    "def notify_deploy(service, version, environment):\n"
    "    url = settings.slack_webhooks[environment]\n"
    "    requests.post(url, json={'text': service}, timeout=10)"
)
# a list of files at the top level, not under a "files" key
JSON_FILES = json.dumps(
    [{"path": "app/settings.py", "content": SETTINGS}, {"path": "app/notify.py", "content": NOTIFY}]
)

BLOCK_SHAPES = [
    (
        "closing-fence-glued",
        f"Here:\n{F}python\ndef f(x):\n    return x + 1{F}\n\nThat adds one.",
        None,
        "answered",
        "return x + 1",
        "adds one",
    ),
    (
        "text-after-closing-fence",
        f"Code:\n{F}py\nimport numpy as np\n{F}<end_code>\n",
        None,
        "answered",
        "import numpy as np",
        "end_code",
    ),
    (
        "text-after-closing-fence-prose",
        f"{F}python\ndef f(x):\n    return x\n{F} This returns x unchanged.\n",
        None,
        "answered",
        "return x",
        "unchanged",
    ),
    (
        "all-lines-indented",
        f"{F}python\n    def f(x):\n        return x * 2\n{F}",
        None,
        "answered",
        "def f(x):\n    return x * 2",
        "",
    ),
    (
        "abandoned-first-attempt",
        "import json\nimport pickle\nSorry, let me try again\nimport csv\n\ndef load(p):\n"
        "    with open(p, newline='') as fh:\n        return list(csv.reader(fh))",
        None,
        "answered",
        "def load(p):",
        "pickle",
    ),
    (
        "abandoned-attempt-on-second-thought",
        "import pickle\nOn second thought, JSON is safer:\nimport json\n\ndef load(p):\n"
        "    with open(p, encoding='utf-8') as fh:\n        return json.load(fh)",
        None,
        "answered",
        "def load(p):",
        "pickle",
    ),
    ("untagged-csharp", f"Here is C#:\n{F}\n{CSHARP}\n{F}", None, "no-code", "", "using"),
    ("untagged-javascript", f"{F}\n{JS}\n{F}", None, "no-code", "", "function"),
    ("untagged-javascript-short", f"{F}\n{JS_SHORT}\n{F}", None, "no-code", "", "function"),
    ("untagged-sql", f"Run this:\n{F}\n{SQL_TEXT}\n{F}", None, "no-code", "", "SELECT"),
    ("json-object-raw", JSON_CODE, None, "answered", "def home():", '"code"'),
    ("json-object-fenced", f"{F}json\n{JSON_CODE}\n{F}", None, "answered", "def home():", "{"),
    (
        "json-list-of-files-fenced",
        f"{F}json\n{JSON_FILES}\n{F}",
        "notify_deploy",
        "answered",
        "# app/settings.py\nfrom pydantic_settings",
        '"path"',
    ),
    (
        "json-list-of-files-raw",
        JSON_FILES,
        "notify_deploy",
        "answered",
        "# app/notify.py\n",
        '"content"',
    ),
    (
        "json-tool-call-arguments",
        '{"name": "python", "arguments": "{\\"code\\": \\"def f():\\\\n    return 1\\"}"}',
        None,
        "answered",
        "def f():",
        "arguments",
    ),
    (
        "split-over-two-files",
        f"{F}python:app/settings.py\n{SETTINGS}\n{F}\n\n{F}python\n# app/notify.py\n{NOTIFY}\n{F}",
        "notify_deploy",
        "answered",
        "# app/settings.py\nfrom pydantic_settings",
        "",
    ),
]


@pytest.mark.parametrize(
    ("response", "entry_point", "outcome", "has", "lacks"),
    [pytest.param(*shape[1:], id=shape[0]) for shape in BLOCK_SHAPES],
)
def test_block_shapes(
    response: str, entry_point: str | None, outcome: str, has: str, lacks: str
) -> None:
    got = extract(response, entry_point)
    assert got.outcome == outcome, got.code
    assert has in got.code
    if lacks:
        assert lacks not in got.code


# --- truncated code: the longest prefix of whole statements that parses ------------

CUT = [
    pytest.param(
        f"{F}python\nimport time\n\ndef f():\n    t0 = time.monotonic()\n    x = g(1,",
        True,
        "answered",
        "t0 = time.monotonic()",
        "x = g",
        id="mid-call-arguments",
    ),
    pytest.param(
        f"{F}python\nimport time\n\ndef f():\n    t0 = time.monotonic()\n    time.sle",
        True,
        "answered",
        "t0 = time.monotonic()",
        "time.sle",
        id="cut-line-that-parses-is-left-out",
    ),
    pytest.param(
        f"<think>plan</think>\n{F}python\nimport os\n\ndef a():\n    return 1\n\ndef b(p):\n"
        '    s = "unclosed',
        True,
        "answered",
        "def a():",
        "def b",
        id="after-a-closed-reasoning-block",
    ),
    pytest.param(
        f"{F}python\ndef f(x):\n    return x + 1\n{F}\nAnd the second one:\n{F}python\n"
        "def g(x):\n    a = 1\n    return f(x",
        True,
        "answered",
        "def g(x):\n    a = 1",
        "return f(x",
        id="cut-in-the-last-of-several-blocks",
    ),
    pytest.param(
        f"{F}python\nimport subprocess\n\ndef run(cmd):\n    return subprocess.run(cmd,",
        True,
        "unparseable",
        "def run",
        "",
        id="cut-in-the-only-definition",
    ),
    pytest.param(
        f"{F}python\ndef f(:\n    return 1\n\ndef g():\n    return 2\n",
        False,
        "unparseable",
        "def f(:",
        "",
        id="an-early-error-is-the-models",
    ),
]


@pytest.mark.parametrize(("response", "truncated", "outcome", "has", "lacks"), CUT)
def test_truncated_code_is_judged_on_what_parses(
    response: str, truncated: bool, outcome: str, has: str, lacks: str
) -> None:
    got = extract(response, truncated=truncated)
    assert got.outcome == outcome, got.code
    assert got.cut is (outcome == "answered")
    assert has in got.code
    if lacks:
        assert lacks not in got.code


# --- sanitizing: statement by statement, line numbers kept ---------------------------

DEF = "import math\n\nRATE = 2\n\ndef area(r):\n    return math.pi * r * RATE\n"
SANITIZE = [
    pytest.param(DEF + "print(area(2))", None, ["print("], id="print-demo"),
    pytest.param(DEF + "assert area(1) == 3", None, ["assert"], id="self-check-assert"),
    pytest.param(DEF + "area(3)", "area", ["area(3)"], id="entry-point-call"),
    pytest.param(DEF + "result = area(3)\nprint(result)", None, ["result"], id="usage-assigned"),
    pytest.param(
        DEF + 'if __name__ == "__main__":\n    print(area(1))', None, ["__main__"], id="main-guard"
    ),
    pytest.param(DEF + "for r in (1, 2):\n    print(area(r))", None, ["for r"], id="demo-loop"),
    pytest.param(
        "import asyncio\n\nasync def main():\n    return 1\n\nasyncio.run(main())",
        None,
        ["asyncio.run"],
        id="run-of-own-coroutine",
    ),
    pytest.param(
        "def f():\n    return 1\n\ndef f():\n    return 2",
        None,
        ["return 1"],
        id="earlier-duplicate",
    ),
]
KEPT = [
    pytest.param(DEF, None, id="nothing-to-drop"),
    pytest.param("print('hello')\nx = 42\nprint(x)", None, id="a-script-is-its-statements"),
    pytest.param(
        "import logging\nlog = logging.getLogger(__name__)\n\ndef f():\n    log.info('x')\n"
        "logging.basicConfig(level=logging.INFO)",
        None,
        id="configuration-kept",
    ),
    pytest.param(
        "from flask import Flask\n\ndef create_app():\n    return Flask(__name__)\n\n"
        "app = create_app()\n\n@app.route('/')\ndef index():\n    return 'ok'",
        None,
        id="value-a-definition-reads",
    ),
]


@pytest.mark.parametrize(("code", "entry_point", "dropped"), SANITIZE)
def test_sanitize_drops_what_is_not_the_solution(
    code: str, entry_point: str | None, dropped: list[str]
) -> None:
    tree = ast.parse(code)
    out, kept = sanitize(code, tree, entry_point)
    assert out.count("\n") <= code.count("\n")
    for text in dropped:
        assert text not in out
    # line numbers still point into the whole code
    lines, whole = out.split("\n"), code.split("\n")
    assert all(ln == "" or ln == whole[i] for i, ln in enumerate(lines))
    assert ast.dump(ast.parse(out)) == ast.dump(kept)


@pytest.mark.parametrize(("code", "entry_point"), KEPT)
def test_sanitize_keeps_the_solution(code: str, entry_point: str | None) -> None:
    tree = ast.parse(code)
    out, kept = sanitize(code, tree, entry_point)
    assert out is code and kept is tree
