"""The ``agent`` arm: a coding agent in a repository whose rules live in files (README: Agent arm).

Each cell is an *episode* in a workspace built from the scenario
(:mod:`cvb_engine.agent.workspace`): the model works through five tools
(:mod:`cvb_engine.agent.tools`) for at most ``steps`` rounds, or the user's own
agent program runs in it (``command``); what it leaves in the named file is
scored by the scenario's checks. Its parameters:

``rules``
    where the project memory lives: ``agents-md`` (``AGENTS.md``), ``claude-md``,
    ``adr`` (decision records), ``readme`` (a Conventions section), ``nested``
    (the package's ``AGENTS.md``; the root one holds only distractors).
``load``, ``position``, ``stale``
    the incentivized arm's draw: ``load`` pool distractors, the constraints at
    ``position`` among them, the decisions they replaced beside them or instead.
``budget``
    bytes of the rules files delivered (README: Agent arm): the files, in reading
    order, share the budget and are written into the workspace cut at a line
    boundary with a marker line (:func:`cvb_engine.memory_notes.cut_in_order`), so
    the tools and a preloaded system message see only what was delivered; the
    record stores per constraint whether its note was delivered (:func:`memory_of`).
``preload``
    also put the root rules file in the system message, as several agent tools do.
``steps``
    tool rounds before the last request (``tool_choice: "none"``).
``command``, ``timeout``, ``env``
    run this program instead of the tool loop (``agent@command=./my-agent.sh``),
    for at most ``timeout`` seconds, with the environment variables named in
    ``env`` (``:``-separated) passed through (README: Bring your own agent).

The messages this module builds are what the model (or the program, on stdin)
is given first; the episode itself runs in :mod:`cvb_engine.agent.run`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cvb_engine.agent.workspace import Rules, Workspace, build_workspace, task_message
from cvb_engine.arms import ArmContext, Message, register_arm
from cvb_engine.arms.incentivized import Position
from cvb_engine.memory_notes import Stale
from cvb_engine.scenario import Scenario

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Params(BaseModel):
    """Parameters of the agent arm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: Rules = Field("agents-md", description="where the project memory lives")
    load: int = Field(0, ge=0, le=2000, description="distractor notes from the memory pool")
    position: Position = Field("spread", description="where the constraints sit among them")
    stale: Stale | None = Field(
        None,
        description="the decisions the constraints replaced: beside them (with) or instead (only)",
    )
    budget: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="bytes of the rules files delivered, shared in reading order (root "
        "AGENTS.md before the package's, decision records by number, all of README.md); "
        "each file is cut at a line boundary with a marker, the rest is not in the workspace",
    )
    preload: bool = Field(False, description="the root rules file also in the system message")
    steps: int = Field(12, ge=1, le=100, description="tool rounds before the final answer")
    command: str | None = Field(None, description="your own agent program, run in the workspace")
    timeout: float = Field(600.0, gt=0, le=7200, description="seconds the command may run")
    env: str | None = Field(None, description="variables passed to the command, a:b:c")

    @field_validator("stale", "budget", mode="before")
    @classmethod
    def _none(cls, value: object) -> object:
        # ``stale=none`` / ``budget=none`` name the default, so a sweep can include it
        return None if isinstance(value, str) and value.strip().lower() in ("none", "") else value

    @field_validator("command", "env")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("may not be empty")
        return value.strip() if value is not None else None

    @field_validator("env")
    @classmethod
    def _names(cls, value: str | None) -> str | None:
        if value is None:
            return None
        names = [n.strip() for n in value.split(":") if n.strip()]
        bad = [n for n in names if not _VARIABLE.match(n)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: not environment variable names")
        return ":".join(names)

    @model_validator(mode="after")
    def _coherent(self) -> Params:
        if self.preload and self.rules == "adr":
            raise ValueError("rules=adr has no root rules file to preload")
        if self.env and not self.command:
            raise ValueError("env is for a command (command=...)")
        return self

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(self.env.split(":")) if self.env else ()


def workspace_of(scenario: Scenario, params: Params, context: ArmContext) -> Workspace:
    """The workspace a cell of this variant starts in (every file as delivered)."""
    pool = context.pool if params.load else ()
    return build_workspace(
        scenario, params.rules, params.load, params.position, pool, params.stale, params.budget
    )


def memory_of(scenario: Scenario, params: Params, context: ArmContext) -> dict[str, Any] | None:
    """What a record of this variant stores about its memory (``Record.memory_json``), in the
    incentivized arm's shape (``arm: "agent"``, ``channel``: the ``rules`` value): per
    constraint whether its current note reached the agent whole (``delivered``) and its
    superseded note (``superseded_delivered``). None without ``stale`` or ``budget`` (such
    records stay as they were: every note delivered)."""
    if params.stale is None and params.budget is None:
        return None
    return workspace_of(scenario, params, context).delivery


def agent_messages(scenario: Scenario, params: Params, context: ArmContext) -> list[Message]:
    """The episode's first messages: system (the root rules file in it with ``preload``)
    and the task; a command gets the task alone, on stdin."""
    from cvb_engine.agent.episode import system_message

    workspace = workspace_of(scenario, params, context)
    task = task_message(scenario, workspace.targets)
    if params.command:
        return [{"role": "user", "content": task}]
    root = workspace.root_rules if params.preload else None
    text = workspace.files.get(root) if root else None
    return [
        {"role": "system", "content": system_message(root, text)},
        {"role": "user", "content": task},
    ]


@register_arm(
    "agent",
    params=Params,
    version="1",
    description="A coding agent in a repository built from the scenario: the constraints live "
    "in its rules files (AGENTS.md, CLAUDE.md, decision records, README, nested), among load "
    "distractors; the model works through list_files, read_file, search_files, write_file and "
    "run_tests for at most `steps` rounds (or your own agent program runs, command=...), and "
    "the file it writes is scored.",
    uses_pool=lambda p: p.load > 0,
    memory_of=memory_of,
)
def agent(scenario: Scenario, params: Params, context: ArmContext) -> list[Message]:
    return agent_messages(scenario, params, context)
