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
            f"{F}\nuntagged = 1\n{F}\n{F}python\ntagged = 1\n{F}", "tagged = 1", id="tagged-wins"
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
        pytest.param(f"{F}python\t`\na = 1\n", f"{F}python\t`\na = 1", id="backtick-in-info"),
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
        "assert extract_code(text) == text.strip('\\n')\n"
    )
    done = run_python(script)
    assert done.returncode == 0, done.stderr
