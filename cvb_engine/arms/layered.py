"""The arms that put an external memory layer in the loop (README: Bring your own memory layer).

``memory``
    Before each cell the runner asks a memory layer for the context of the
    task (:mod:`cvb_engine.memory_layers`: a ``command``, an ``http`` server,
    or the built-in ``bm25``) and gives the model what it returned: text, as
    project memory before the task, or chat messages, before the task's turn.
``memory-tool``
    The model gets no memory in its prompt, only one tool,
    ``search_project_memory(query)``, through the OpenAI tools API; the runner
    answers each call from the layer for at most ``rounds`` rounds, then takes
    the final answer as the reply (:mod:`cvb_engine.memory_run`).

What the layer holds is the project's memory (:func:`layer_entries`): every
constraint of the run's scenarios phrased as memory, as the incentivized arm
phrases it, plus ``load`` distractors from the memory pool. Entries carry
opaque ids and a pool kind, so neither tells a constraint from a distractor;
the layer never sees a constraint's id, and a query carries only the task and
the scenario's category.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cvb_engine.arms import ArmContext, ArmError, Message, register_arm
from cvb_engine.memory_notes import CURRENT_AS_OF, Stale
from cvb_engine.prompts import SYSTEM, task_block
from cvb_engine.scenario import Scenario

#: The header before a layer's text context (the same words as the incentivized arm's).
LAYER_HEADER = (
    "Project memory: notes the team keeps about this repository, gathered over earlier work on it."
)
LAYER_MEMORY = "{header}\n\n{context}\n\n---\n\n{task_block}"
#: Stands where the layer's context goes when there is none yet (a preview).
PLACEHOLDER = "[the memory layer's context for this task]"

TOOL_NAME = "search_project_memory"
#: The system message of memory-tool: the seed's, and one line saying the tool exists.
TOOL_SYSTEM = (
    SYSTEM + " The team's notes about this repository (past decisions, conventions, "
    f"history) can be searched with the {TOOL_NAME} tool."
)
SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the notes the team keeps about this repository: past decisions, "
            "conventions and history. Returns the most relevant notes."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for, in a few words"}
            },
            "required": ["query"],
        },
    },
}

#: The pool kind a constraint of each category is filed under in the layer's memory,
#: so that an entry's kind does not tell constraints from distractors.
KIND_OF_CATEGORY = {
    "library-choice": "dependencies",
    "security": "ops",
    "encoding-io": "data",
    "style-architecture": "naming",
    "error-handling": "ops",
    "concurrency": "deployment",
    "logging-testing": "process",
    "ivr": "process",
}

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LayerParams(BaseModel):
    """Which memory layer, and what it holds. One of ``command`` and ``url``, else the
    built-in ``layer`` (``bm25``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layer: str = Field("bm25", description="a built-in layer, when no command or url is given")
    command: str | None = Field(None, description="a command speaking cvb-memory/1 on stdio")
    url: str | None = Field(None, description="the base URL of an HTTP layer (/ingest, /query)")
    key_env: str | None = Field(None, description="the HTTP layer's key variable (a name)")
    load: int = Field(0, ge=0, le=2000, description="distractors from the memory pool")
    k: int = Field(5, ge=1, le=50, description="entries a query asks for")
    timeout: float = Field(30.0, gt=0, le=600, description="seconds a layer call may take")
    stale: Stale | None = Field(
        None,
        description="the decisions the constraints replaced, in the layer beside them (with) "
        "or instead of them (only)",
    )

    @field_validator("stale", mode="before")
    @classmethod
    def _no_stale(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("none", "") else value

    @field_validator("command", "url", "key_env")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("may not be empty")
        return value.strip() if value is not None else None

    @field_validator("key_env")
    @classmethod
    def _a_name(cls, value: str | None) -> str | None:
        if value is not None and not _VARIABLE.match(value):
            raise ValueError(f"{value!r} is not an environment variable name")
        return value

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _one_layer(self) -> LayerParams:
        if self.command and self.url:
            raise ValueError("give command or url, not both")
        if self.key_env and not self.url:
            raise ValueError("key_env is for an HTTP layer (url=...)")
        return self


class ToolParams(LayerParams):
    """A layer, and how many rounds of tool calls the model gets."""

    rounds: int = Field(4, ge=1, le=10, description="rounds of tool calls before the answer")


def layer_spec(params: Any) -> Any:
    """The :class:`cvb_engine.memory_layers.LayerSpec` a variant's parameters
    (:class:`LayerParams`) name.

    Raises:
        ArmError: an unknown built-in layer.
    """
    from cvb_engine.memory_layers import LayerError
    from cvb_engine.memory_layers import layer_spec as make

    try:
        return make(params.command, params.url, params.layer, params.key_env, params.timeout)
    except LayerError as exc:
        raise ArmError(str(exc)) from None


def entry_id(source: str) -> str:
    """An opaque entry id: the same shape for a constraint and a distractor."""
    return "m" + hashlib.sha256(source.encode()).hexdigest()[:11]


def layer_entries(
    scenarios: Iterable[Scenario], load: int, pool: Sequence[Any], stale: Stale | None = None
) -> tuple[list[Any], dict[str, tuple[str, str]]]:
    """The project memory a layer ingests, and whose each constraint entry is.

    Returns the entries (constraints and distractors interleaved in a fixed
    order, by id) and a map from a constraint entry's id to its (scenario id,
    constraint id). Distractors are the first ``load`` pool entries in a fixed
    order, so a larger load extends a smaller one.

    ``stale="with"`` adds each constraint's superseded note (dated, as written)
    beside its current one, which is then dated later, as the incentivized arm
    shows them; ``stale="only"`` ingests the superseded note instead of the current
    one. A superseded entry is of the constraint's kind with an opaque id like any
    other, and is not in the map: a lookup that returns it holds no current decision.
    """
    from cvb_engine.memory_layers import MemoryEntry

    if load > len(pool):
        raise ArmError(f"load={load}: the memory pool has only {len(pool)} entries")
    owner: dict[str, tuple[str, str]] = {}
    entries = []
    for scenario in scenarios:
        kind = KIND_OF_CATEGORY.get(scenario.category, "process")
        for c in scenario.constraints:
            text = " ".join(c.text.split())
            if stale is not None and c.superseded:
                old = " ".join(c.superseded.split())
                sid = entry_id(f"superseded\0{scenario.id}\0{c.id}")
                entries.append(MemoryEntry(id=sid, text=old, kind=kind))
                if stale == "only":
                    continue
                text = f"{CURRENT_AS_OF}: {text}"
            eid = entry_id(f"constraint\0{scenario.id}\0{c.id}")
            owner[eid] = (scenario.id, c.id)
            entries.append(MemoryEntry(id=eid, text=text, kind=kind))
    chosen = sorted(pool, key=lambda e: hashlib.sha256(f"layer\0{e.id}".encode()).hexdigest())
    entries += [
        MemoryEntry(id=entry_id(f"pool\0{e.id}"), text=" ".join(e.text.split()), kind=e.kind)
        for e in chosen[:load]
    ]
    entries.sort(key=lambda e: e.id)
    return entries, owner


def query_text(scenario: Scenario) -> str:
    """What a query carries of the cell: the task as the model sees it."""
    return task_block(scenario)


@register_arm(
    "memory",
    params=LayerParams,
    version="1",
    description="The context an external memory layer returns for the task (command, http, "
    "or the built-in bm25), over the project's memory: the constraints among load distractors.",
    uses_pool=lambda p: p.load > 0,
    live=True,
)
def memory(
    scenario: Scenario, params: LayerParams, context: ArmContext, recall: Any = None
) -> list[Message]:
    system = {"role": "system", "content": SYSTEM}
    task = task_block(scenario)
    if recall is not None and recall.messages:
        return [system, *recall.messages, {"role": "user", "content": task}]
    text = PLACEHOLDER if recall is None else (recall.context or "").strip()
    if not text:  # the layer found nothing: the task alone
        return [system, {"role": "user", "content": task}]
    user = LAYER_MEMORY.format(header=LAYER_HEADER, context=text, task_block=task)
    return [system, {"role": "user", "content": user}]


@register_arm(
    "memory-tool",
    params=ToolParams,
    version="1",
    description=f"No memory in the prompt: one tool, {TOOL_NAME}(query), answered by a memory "
    "layer (bm25 by default) for at most `rounds` rounds before the answer.",
    uses_pool=lambda p: p.load > 0,
    live=True,
)
def memory_tool(
    scenario: Scenario, params: ToolParams, context: ArmContext, recall: Any = None
) -> list[Message]:
    return [
        {"role": "system", "content": TOOL_SYSTEM},
        {"role": "user", "content": task_block(scenario)},
    ]
