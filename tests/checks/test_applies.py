"""When a constraint applies at all: code whose threads share no mutable state."""

from __future__ import annotations

import ast

import pytest

from cvb_engine.checks.applies import shares_mutable_state

SHARED = [
    pytest.param(
        "class S:\n    def __init__(self):\n        self.d = {}\n    def put(self, k):\n"
        "        self.d[k] = 1",
        True,
        id="attribute-item-set-in-a-method",
    ),
    pytest.param(
        "class S:\n    def __init__(self):\n        self.n = 0\n    def hit(self):\n        self.n += 1",
        True,
        id="attribute-counter",
    ),
    pytest.param("_C = {}\ndef put(k):\n    _C[k] = 1", True, id="module-dict"),
    pytest.param("N = 0\ndef hit():\n    global N\n    N += 1", True, id="global-rebound"),
    pytest.param(
        "def run(xs):\n    out = []\n    def work(x):\n        out.append(x)\n    pool.map(work, xs)",
        True,
        id="closure-list",
    ),
    pytest.param(
        "import threading\ndef work(xs, out):\n    for x in xs:\n        out.append(x)\n"
        "def run(xs):\n    res = []\n    threading.Thread(target=work, args=(xs, res)).start()",
        True,
        id="list-handed-to-thread",
    ),
    pytest.param(
        "def run(urls):\n    with Pool() as pool:\n        fs = [pool.submit(get, u) for u in urls]\n"
        "        out = []\n        for f in fs:\n            out.append(f.result())\n    return out",
        False,
        id="futures-results-in-a-local",
    ),
    pytest.param(
        "def work(jobs, results):\n    while True:\n        j = jobs.get()\n"
        "        results.put(j * 2)\ndef run(q, r):\n    threading.Thread(target=work, args=(q, r))",
        False,
        id="queues",
    ),
    pytest.param(
        "def total(xs):\n    acc = {}\n    for x in xs:\n        acc[x] = acc.get(x, 0) + 1\n"
        "    return acc",
        False,
        id="locals-only",
    ),
    pytest.param(
        "class S:\n    def __init__(self, clock):\n        self.clock = clock\n        self.d = {}",
        False,
        id="set-up-only",
    ),
    pytest.param(
        "import threading\nclass Worker(threading.Thread):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.n = n\n        self.result = None\n"
        "    def run(self):\n        self.result = self.n * 2",
        False,
        id="thread-hands-back-its-result",
    ),
    pytest.param(
        "def helper(items):\n    items.sort()\n    return items",
        False,
        id="parameter-of-a-plain-function",
    ),
]


@pytest.mark.parametrize(("code", "shared"), SHARED)
def test_shares_mutable_state(code: str, shared: bool) -> None:
    assert shares_mutable_state(ast.parse(code)) is shared
