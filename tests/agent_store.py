"""A store holding the agent arm beside the mandated arm, with hand-made episode traces.

One model (``m-a``), one scenario (the conftest's ``http-client-choice``, constraints
``httpx-not-requests`` and ``timeout-set``), two repetitions, arms ``mandated``,
``agent`` and ``agent@preload=true``. Agent records are scored by the engine's
own :func:`cvb_engine.scoring.score_agent` (the file the trace says was
written); every figure the tests expect is counted by hand below.

======================  ==========================================================
agent, rep 0            reads AGENTS.md (both constraints shown), writes GOOD:
                        strict; 2 steps, 300 tokens, ended by answer
agent, rep 1            writes BAD at once: reads nothing, violates both;
                        1 step, 120 tokens, ended by answer
agent@preload=true, 0   hostile episode: a refused read outside the workspace,
                        a search whose query and hits carry Markdown and HTML (one
                        hit on the timeout-set line), a README.md read whose text
                        carries a remote image, writes NO_TIMEOUT (violates
                        timeout-set); read: timeout-set (the search hit); both
                        constraints in the system message (preloaded);
                        12 steps, no tokens reported, ended by the steps limit
agent@preload=true, 1   never writes the file: no-code; reads nothing, both
                        preloaded; 1 step, 80 tokens, answer
mandated, 0 and 1       GOOD replies (strict)
======================  ==========================================================

So: agent strict 1/2, read 1/2, strict when read 1/1, when not read 0/1;
agent@preload=true strict 0/2, read 1/2, rules in the system message 2/2, strict
when read 0/1, when not read 0/1; gap to mandated 1 − 1/2 = 0.5 and 1 − 0 = 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session

from cvb_engine.agent.trace import AgentTrace, ConstraintPlace, RulesFile, ToolCall, WrittenFile
from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.results import save_scores
from cvb_engine.scenario import load_text
from cvb_engine.scoring import score_agent, score_response
from cvb_engine.store import Record, Run, get_engine

RUN_ID = "agent-r1"
MODEL = "m-a"
SID, CATEGORY = "http-client-choice", "library-choice"
C1, C2 = "httpx-not-requests", "timeout-set"
AGENT, PRELOAD = "agent", "agent@preload=true"
ARMS = ("mandated", AGENT, PRELOAD)
TARGET = "app/fetch.py"

GOOD_CODE = "import httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n"
BAD_CODE = "import requests\n\n\ndef fetch_json(url):\n    return requests.get(url).json()\n"
NO_TIMEOUT_CODE = "import httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url).json()\n"
GOOD_REPLY = f"```python\n{GOOD_CODE}```"

RULES_TEXT = (
    "# AGENTS.md\n"
    "\n"
    "Notes for people and agents working in this repository.\n"
    "\n"
    "- The team standardized on httpx after requests caused the March socket-exhaustion "
    "incident.\n"
    "- The gateway team measured that calls without a timeout caused the 2025 stalls.\n"
)
PLACES = (
    ConstraintPlace(constraint_id=C1, path="AGENTS.md", line=5, end_line=5),
    ConstraintPlace(constraint_id=C2, path="AGENTS.md", line=6, end_line=6),
)
RULES = (RulesFile(path="AGENTS.md", constraints=(C1, C2), notes=2),)

#: What a hostile agent or model puts in a transcript: a remote image, a link, raw HTML.
IMAGE_URL = "http://evil.test/agent.png"
HOSTILE = (
    f"![x]({IMAGE_URL}) [click](http://evil.test) <img src={IMAGE_URL}> <b>bold</b> :red[red] $x^2$"
)
SEARCH_RESULT = (
    f"AGENTS.md:6: - The gateway team measured that calls without a timeout caused the 2025 "
    f"stalls.\nREADME.md:3: {HOSTILE}"
)
README_TEXT = f"# Orbital Ledger\n\nAn imaginary product.\n{HOSTILE}\n"


def _call(
    round_: int, name: str, args: dict[str, object] | str, result: str, **extra: object
) -> ToolCall:
    text = args if isinstance(args, str) else json.dumps(args)
    parsed = None if isinstance(args, str) else {k: v for k, v in args.items()}  # type: ignore[misc]
    return ToolCall(
        round=round_,
        call_id=f"call-{round_}-{name}",
        name=name,
        arguments=text,
        parsed=parsed,  # type: ignore[arg-type]
        result=result,
        **extra,  # type: ignore[arg-type]
    )


def _trace(
    variant: str,
    calls: list[ToolCall],
    code: str | None,
    read: dict[str, bool],
    *,
    steps: int,
    tokens: tuple[int, int] | None,
    ended: str = "answer",
    final: str = "Done.",
    preloaded: tuple[str, ...] = (),
) -> str:
    return AgentTrace(
        transport="tools",
        variant=variant,
        params={"preload": variant == PRELOAD},
        targets=(TARGET,),
        rules_files=RULES,
        constraints=PLACES,
        preload=variant == PRELOAD,
        preloaded=preloaded,
        task=f"Write a Python function fetch_json(url) ...\n\nImplement it in `{TARGET}`.",
        calls=tuple(calls),
        files=(WrittenFile(path=TARGET, content=code, size=len(code)),) if code else (),
        steps=steps,
        requests=steps + 1,
        prompt_tokens=tokens[0] if tokens else None,
        completion_tokens=tokens[1] if tokens else None,
        latency_s=1.5,
        ended_by=ended,  # type: ignore[arg-type]
        final_text=final,
        read=read,
    ).to_json()


def _write(round_: int, code: str) -> ToolCall:
    return _call(
        round_,
        "write_file",
        {"path": TARGET, "content": code},
        f"wrote {len(code)} bytes to {TARGET}",
        path=TARGET,
    )


TRACES: dict[tuple[str, int], str] = {
    (AGENT, 0): _trace(
        AGENT,
        [
            _call(
                1, "read_file", {"path": "AGENTS.md"}, RULES_TEXT, path="AGENTS.md", shown=(C1, C2)
            ),
            _write(2, GOOD_CODE),
        ],
        GOOD_CODE,
        {C1: True, C2: True},
        steps=2,
        tokens=(250, 50),
    ),
    (AGENT, 1): _trace(
        AGENT, [_write(1, BAD_CODE)], BAD_CODE, {C1: False, C2: False}, steps=1, tokens=(100, 20)
    ),
    (PRELOAD, 0): _trace(
        PRELOAD,
        [
            _call(1, "list_files", {"path": "."}, "AGENTS.md\nREADME.md\napp/\n", path="."),
            _call(
                2,
                "read_file",
                {"path": "../../etc/passwd"},
                "",
                refused=True,
                reason="'../../etc/passwd' is outside the workspace",
            ),
            _call(3, "search_files", {"query": HOSTILE}, SEARCH_RESULT, shown=(C2,)),
            _call(4, "read_file", {"path": "README.md"}, README_TEXT, path="README.md"),
            _call(5, "nuke_everything", "{not json", "", refused=True, reason="unknown tool"),
            _write(6, NO_TIMEOUT_CODE),
        ],
        NO_TIMEOUT_CODE,
        {C1: False, C2: True},
        steps=12,
        tokens=None,
        ended="steps",
        final=HOSTILE,
        preloaded=(C1, C2),
    ),
    (PRELOAD, 1): _trace(
        PRELOAD,
        [],
        None,
        {C1: False, C2: False},
        steps=1,
        tokens=(70, 10),
        final="I can't.",
        preloaded=(C1, C2),
    ),
}


def fill(db_url: str, valid_text: str) -> None:
    """Write the run ``RUN_ID`` into the store at ``db_url``."""
    scenario = load_text(valid_text).scenario
    with Session(get_engine(db_url)) as session:
        session.add(
            Run(
                id=RUN_ID,
                prompt_version=PROMPT_VERSION,
                params_json=json.dumps({"arms": list(ARMS), "models": [MODEL], "runs": 2}),
                status="finished",
                total_cells=len(ARMS) * 2,
            )
        )
        session.commit()
        for arm in ARMS:
            for rep in (0, 1):
                agent = TRACES.get((arm, rep))
                trace = AgentTrace.from_json(agent)
                record = Record(
                    run_id=RUN_ID,
                    model=MODEL,
                    scenario_id=SID,
                    scenario_version=1,
                    scenario_sha256="x",
                    category=CATEGORY,
                    arm=arm,
                    rep=rep,
                    status="ok",
                    response=(trace.final_text or "") if trace else GOOD_REPLY,
                    agent_json=agent,
                    messages_sha256="m",
                    prompt_version=PROMPT_VERSION,
                )
                session.add(record)
                session.flush()
                scored = (
                    score_agent(scenario, agent)
                    if agent is not None
                    else score_response(scenario, GOOD_REPLY)
                )
                save_scores(session, record, scored, fresh=True)
        session.commit()


def write_scenarios(root: Path, valid_text: str) -> Path:
    (root / CATEGORY).mkdir(parents=True, exist_ok=True)
    (root / CATEGORY / f"{SID}.yaml").write_text(valid_text, "utf-8")
    return root
