"""A store holding the seed arms beside memory-layer arms, with memory traces, for report tests.

Two models × two scenarios × two repetitions × the arms ``cold``, ``mandated``,
``incentivized``, ``memory`` (load 0), ``memory@load=20`` and ``memory-tool``.
Records are scored by the engine's own scoring; their memory traces have the
shape :mod:`cvb_engine.memory_run` writes. Besides the ordinary records the
store holds one API error (m-a, cold, S2, rep 1), one memory failure (m-b,
memory@load=20, S1, rep 0) and one record whose ``memory_json`` is not a trace
(m-a, memory-tool, S2, rep 1). Every figure the tests expect is counted by hand
in the comments below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlmodel import Session

from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.results import save_scores
from cvb_engine.scenario import load_text
from cvb_engine.scoring import score_response
from cvb_engine.store import Record, Run, get_engine

RUN_ID = "mem-r1"
S1, S2 = "http-client-choice", "http-client-choice-b"
CATEGORY = {S1: "library-choice", S2: "security"}
C1, C2 = "httpx-not-requests", "timeout-set"
MODELS = ("m-a", "m-b")
MEMORY, MEMORY_20, TOOL = "memory", "memory@load=20", "memory-tool"
ARMS = ("cold", "mandated", "incentivized", MEMORY, MEMORY_20, TOOL)

GOOD = "```python\nimport httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n```"
NO_TIMEOUT = (
    "```python\nimport httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url).json()\n```"
)
BAD = (
    "```python\nimport requests\n\n\ndef fetch_json(url):\n    return requests.get(url).json()\n```"
)

LAYER = {"label": "bm25", "name": "bm25", "version": "0.3.16+cvb.1", "transport": "builtin"}
CONTEXT = "- The team standardized on httpx.\n- Calls without a timeout caused the 2025 stalls."
#: A query and a result the model and the layer could send: Markdown, HTML, an escape.
HOSTILE_QUERY = "![x](http://evil.test/a.png) <img src=x onerror=alert(1)> **http timeout**"
HOSTILE_RESULT = "- \x1b[31mred\x1b[0m <script>alert(1)</script> [click](http://evil.test)"
FAILURE = "memory layer 'bm25': query timed out after 30.0 s"
UNREADABLE = '{"arm": "memory-tool", "calls": "not a list"'


def call(
    source: str, round_: int, query: str | None, context: str | None, held: list[str], **extra: Any
) -> dict[str, Any]:
    out = {
        "source": source,
        "round": round_,
        "query": query,
        "latency_s": 0.004,
        "context": context,
        "messages": None,
        "entries": ["m0123456789a"] if held else [],
        "held": held,
        "call_id": f"call-{round_}" if source == "tool" else None,
        "arguments": json.dumps({"query": query}) if source == "tool" else None,
        "error": None,
    }
    out.update(extra)
    return out


def trace(arm: str, calls: list[dict[str, Any]], error: str | None = None) -> str:
    held: list[str] = []
    for c in calls:
        held += [h for h in c["held"] if h not in held]
    rounds = max((c["round"] for c in calls), default=0)
    return json.dumps(
        {
            "arm": arm,
            "layer": LAYER,
            "ingest": {"entries": 24, "latency_s": 0.02},
            "calls": calls,
            "rounds": rounds,
            "held": held,
            "error": error,
        }
    )


def prompt_trace(held: list[str]) -> str:
    return trace("memory", [call("prompt", 0, "Write a Python function fetch_json", CONTEXT, held)])


# memory-tool cells: (model, scenario, rep) -> (reply, trace text)
#   m-a: S1/0 one call holding both (strict) · S1/1 two calls, the first holding
#        httpx-not-requests (strict) · S2/0 no call (not strict) · S2/1 unreadable trace
#        (strict; left out of the tool-use figures)
#        -> records 3, looked up 2, calls 3, lookups 3, holding 2,
#           strict looked up 2/2, did not look 0/1, a constraint came back 2/2
#   m-b: S1/0 one call holding nothing (not strict) · S1/1 no call (not strict) ·
#        S2/0 a refused call, then one holding timeout-set (strict) · S2/1 no call
#        -> records 4, looked up 2, calls 3, lookups 2, holding 1,
#           strict looked up 1/2, did not look 0/2, a constraint came back 1/1
TOOL_CELLS: dict[tuple[str, str, int], tuple[str, str]] = {
    ("m-a", S1, 0): (GOOD, trace(TOOL, [call("tool", 1, "http client", CONTEXT, [C1, C2])])),
    ("m-a", S1, 1): (
        GOOD,
        trace(
            TOOL,
            [
                call("tool", 1, "http library", CONTEXT, [C1]),
                call("tool", 2, "timeouts", "- Logs go through structlog.", []),
            ],
        ),
    ),
    ("m-a", S2, 0): (NO_TIMEOUT, trace(TOOL, [])),
    ("m-a", S2, 1): (GOOD, UNREADABLE),
    ("m-b", S1, 0): (NO_TIMEOUT, trace(TOOL, [call("tool", 1, HOSTILE_QUERY, HOSTILE_RESULT, [])])),
    ("m-b", S1, 1): (BAD, trace(TOOL, [])),
    ("m-b", S2, 0): (
        GOOD,
        trace(
            TOOL,
            [
                call(
                    "tool",
                    1,
                    None,
                    None,
                    [],
                    arguments="{not json",
                    latency_s=0.0,
                    error='the arguments must be a JSON object like {"query": "..."}',
                ),
                call("tool", 2, "timeout policy", CONTEXT, [C2]),
            ],
        ),
    ),
    ("m-b", S2, 1): (NO_TIMEOUT, trace(TOOL, [])),
}


def reply_of(model: str, sid: str, arm: str, rep: int) -> str:
    """The reply of every cell that is not a memory-tool cell.

    Strict accuracy (strictly accurate / scored, error records apart):

    ==========  =========  =========  ============  =======  ===============
    model       cold       mandated   incentivized  memory   memory@load=20
    ==========  =========  =========  ============  =======  ===============
    m-a         0/3 +1 API 4/4        4/4           4/4      2/4
    m-b         0/4        4/4        2/4           2/4      0/3 +1 memory
    ==========  =========  =========  ============  =======  ===============
    """
    if arm == "cold":
        return BAD
    if arm == "mandated" or (model == "m-a" and arm in ("incentivized", MEMORY)):
        return GOOD
    if arm == MEMORY_20:
        return GOOD if (model == "m-a" and sid == S1) else NO_TIMEOUT
    return GOOD if sid == S1 else NO_TIMEOUT  # m-b, incentivized and memory


def scenario_text(valid_text: str, sid: str) -> str:
    return valid_text.replace("id: http-client-choice", f"id: {sid}", 1).replace(
        "category: library-choice", f"category: {CATEGORY[sid]}", 1
    )


def write_scenarios(root: Path, valid_text: str) -> Path:
    for sid, category in CATEGORY.items():
        (root / category).mkdir(parents=True, exist_ok=True)
        (root / category / f"{sid}.yaml").write_text(scenario_text(valid_text, sid), "utf-8")
    return root


def fill(db_url: str, valid_text: str) -> None:
    """Write the run ``RUN_ID`` into the store at ``db_url``."""
    scenario = {sid: load_text(scenario_text(valid_text, sid)).scenario for sid in CATEGORY}
    params = {"arms": list(ARMS), "models": list(MODELS), "runs": 2}
    with Session(get_engine(db_url)) as session:
        session.add(
            Run(
                id=RUN_ID,
                prompt_version=PROMPT_VERSION,
                params_json=json.dumps(params),
                status="finished",
                total_cells=len(MODELS) * len(CATEGORY) * len(ARMS) * 2,
            )
        )
        session.commit()
        for model in MODELS:
            for sid in CATEGORY:
                for arm in ARMS:
                    for rep in (0, 1):
                        record = _record(model, sid, arm, rep)
                        session.add(record)
                        session.flush()
                        if record.status == "ok":
                            reply = record.response or ""
                            save_scores(session, record, score_response(scenario[sid], reply))
        session.commit()


def _record(model: str, sid: str, arm: str, rep: int) -> Record:
    status, error, kind, memory = "ok", None, None, None
    if arm == TOOL:
        reply, memory = TOOL_CELLS[(model, sid, rep)]
    else:
        reply = reply_of(model, sid, arm, rep)
    if arm == MEMORY:
        memory = prompt_trace([C1, C2] if model == "m-a" or sid == S1 else [C1])
    if arm == MEMORY_20:
        memory = prompt_trace([C1])
    if (model, sid, arm, rep) == ("m-a", S2, "cold", 1):
        status, error, kind, reply = "error", "HTTP 500: upstream failed", "api", None
    if (model, sid, arm, rep) == ("m-b", S1, MEMORY_20, 0):
        status, error, kind, reply = "error", FAILURE, "memory", None
        failed = call("prompt", 0, "Write a Python function", None, [], error=FAILURE)
        memory = trace("memory", [failed], FAILURE)
    return Record(
        run_id=RUN_ID,
        model=model,
        scenario_id=sid,
        scenario_version=1,
        scenario_sha256="x",
        category=CATEGORY[sid],
        arm=arm,
        rep=rep,
        status=status,
        error=error,
        error_kind=kind,
        memory_json=memory,
        response=reply,
        messages_sha256="m",
        prompt_version=PROMPT_VERSION,
    )
