"""Code extraction from model responses."""

from __future__ import annotations

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
