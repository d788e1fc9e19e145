"""What a record of the ``agent`` arm stores about its episode (``Record.agent_json``).

One :class:`AgentTrace` per agent cell, written by :mod:`cvb_engine.agent.run`
and read by every report, the results file and the studio. It is the only
place an agent episode's shape is declared: the reports build on it, so its
fields only ever grow (new fields get defaults; none is renamed or removed).

Everything in it came from a model, an agent program or a results file that
may have been edited by hand: :meth:`AgentTrace.from_json` validates it
strictly and gives ``None`` (or, with :func:`explain`, the reason) for
anything else, so a reader shows "unavailable" and never fails. The texts
inside are still untrusted: they go through the safe-text helpers of whatever
output shows them.

Read versus obeyed: :attr:`AgentTrace.read` says per constraint whether the
agent *saw* its text (opened the file holding it with ``read_file``, or got
a ``search_files`` result showing one of its lines; for a command, a rules
file whose access time moved). With ``preload=true`` the root rules file's
constraints were in the system message anyway: :attr:`AgentTrace.preloaded`
lists them apart, and :func:`read_flags` takes ``seen=True`` to count them.
The verdicts say whether it *obeyed*; the two are independent.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "TRACE_FORMAT",
    "AgentTrace",
    "ArgValue",
    "CommandRun",
    "ConstraintPlace",
    "EndedBy",
    "RulesFile",
    "ToolCall",
    "Transport",
    "WrittenFile",
    "explain",
    "read_any",
    "read_flags",
    "read_trace",
    "trace_value",
]

#: The trace's format name, stored in it: a reader knows what it holds.
TRACE_FORMAT: Final = "cvb-agent-trace/1"

_STRICT = ConfigDict(strict=True, frozen=True, extra="ignore", allow_inf_nan=False)

Transport = Literal["tools", "command"]
#: How an episode ended: the model answered without a tool call (``answer``), its
#: ``steps`` tool rounds ran out (``steps``, then one last request without tools),
#: a request failed for good or the agent program failed to start (``error``),
#: the agent program ran out of time (``timeout``).
EndedBy = Literal["answer", "steps", "error", "timeout"]
#: A parsed argument value as the trace keeps it (bounded text, a number, a flag).
ArgValue = str | int | float | bool | None


class ToolCall(BaseModel):
    """One tool call the model made, answered or refused."""

    model_config = _STRICT

    #: The tool round it was made in (1-based).
    round: int
    call_id: str | None = None
    #: The tool's name as the model sent it (bounded; may name no tool).
    name: str
    #: The arguments as the model sent them (raw text, bounded; ``arguments_cut`` says so).
    arguments: str | None = None
    arguments_cut: bool = False
    #: The arguments once parsed, each value bounded (None when they were not a JSON object).
    parsed: dict[str, ArgValue] | None = None
    #: What the tool returned to the model (bounded; ``result_cut`` says so).
    result: str = ""
    result_cut: bool = False
    #: The call was refused (bad path, unknown tool, bad arguments, over a cap);
    #: ``reason`` says why, in the words the model got.
    refused: bool = False
    reason: str | None = None
    #: The workspace path the call was about, normalised (``read_file``,
    #: ``write_file``, ``list_files``), when it named an allowed one.
    path: str | None = None
    #: Constraints whose text this call showed the model (read or search result).
    shown: tuple[str, ...] = ()
    latency_s: float | None = None


class WrittenFile(BaseModel):
    """A file the agent left in the workspace that the task named (its final content)."""

    model_config = _STRICT

    path: str
    content: str
    #: Size of the file on disk, in bytes (``content`` may be cut; ``cut`` says so).
    size: int = 0
    cut: bool = False


class RulesFile(BaseModel):
    """A file of the workspace that holds project memory (rules or distractor notes)."""

    model_config = _STRICT

    path: str
    #: The constraints whose text it holds, in the order they appear.
    constraints: tuple[str, ...] = ()
    #: How many notes it holds in all (constraints and distractors).
    notes: int = 0


class ConstraintPlace(BaseModel):
    """Where one constraint's text lives in the workspace (1-based lines)."""

    model_config = _STRICT

    constraint_id: str
    path: str
    line: int
    end_line: int


class CommandRun(BaseModel):
    """The user's agent program (``agent@command=...``): what it did, bounded."""

    model_config = _STRICT

    command: str
    exit_code: int | None = None
    stdout: str = ""
    stdout_cut: bool = False
    stderr: str = ""
    stderr_cut: bool = False
    time_s: float | None = None
    timed_out: bool = False
    #: The sandbox that ran it (``bwrap``), or why none could.
    sandbox: str | None = None
    #: Whether file reads could be observed (access times), so ``read`` means something.
    reads_observed: bool = False


class AgentTrace(BaseModel):
    """One agent episode as its record stores it."""

    model_config = _STRICT

    format: Literal["cvb-agent-trace/1"] = TRACE_FORMAT
    transport: Transport
    #: The variant's canonical name and its parameters (every field of its Params).
    variant: str
    params: dict[str, ArgValue] = Field(default_factory=dict)
    #: Digest of the workspace as built (same scenario + params = same digest).
    workspace_sha256: str = ""
    #: The files the task names, workspace-relative, in order.
    targets: tuple[str, ...] = ()
    rules_files: tuple[RulesFile, ...] = ()
    constraints: tuple[ConstraintPlace, ...] = ()
    preload: bool = False
    #: Constraints whose text the system message held (``preload=true``: those of the
    #: root rules file); ``read`` does not count them, it says what the agent opened.
    preloaded: tuple[str, ...] = ()
    #: The task message the agent got (the first user turn, or stdin of a command).
    task: str = ""
    calls: tuple[ToolCall, ...] = ()
    #: The named files' final content (a file never written is absent).
    files: tuple[WrittenFile, ...] = ()
    #: Tool rounds used (replies that made at least one tool call).
    steps: int = 0
    #: Requests made to the endpoint (with retries counted once).
    requests: int = 0
    #: Replies cut at the body limit or ``--max-response-chars``: what came after the cut,
    #: tool calls included, was never read (so it is not among ``calls``).
    replies_cut: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    ended_by: EndedBy = "answer"
    #: The model's last text reply (bounded), which is not scored.
    final_text: str | None = None
    #: Per constraint id: whether the agent saw its text (see the module doc).
    read: dict[str, bool] = Field(default_factory=dict)
    command: CommandRun | None = None
    error: str | None = None

    # ---- derived views the reports use

    @property
    def tool_calls(self) -> int:
        """How many tool calls the model made (refused ones included)."""
        return len(self.calls)

    @property
    def refused(self) -> int:
        """How many tool calls were refused."""
        return sum(c.refused for c in self.calls)

    @property
    def wrote(self) -> bool:
        """Whether every named file exists at the end."""
        return bool(self.targets) and {f.path for f in self.files} >= set(self.targets)

    @property
    def tokens(self) -> int | None:
        """Prompt and completion tokens of the episode, or None when none were reported."""
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def code(self) -> str:
        """The solution to score: the named files' final content, in the task's order
        (several files are joined, each under a ``# file: path`` line)."""
        return solution_of(self.targets, {f.path: f.content for f in self.files})

    def to_json(self) -> str:
        """The trace as ``Record.agent_json`` stores it."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | None) -> AgentTrace | None:
        """The trace in ``text``, or None when there is none or it does not have the
        trace's shape (:func:`explain` says why)."""
        return read_trace(text)


def solution_of(targets: tuple[str, ...] | list[str], contents: dict[str, str]) -> str:
    """The code to score from the named files' contents (missing files are left out)."""
    present = [t for t in targets if t in contents]
    if len(present) == 1 and len(targets) == 1:
        return contents[present[0]]
    return "\n\n".join(f"# file: {t}\n{contents[t]}" for t in present)


def read_trace(text: str | None) -> AgentTrace | None:
    """The trace in ``text`` (a record's ``agent_json``), or None when there is none or it
    is not one (not JSON, a wrong type, a number that is not finite, JSON nested too deep)."""
    if text is None or not isinstance(text, str) or not text.strip():
        return None
    try:
        return AgentTrace.model_validate_json(text)
    except (ValidationError, ValueError, RecursionError):
        return None


def explain(text: str | None) -> str | None:
    """Why ``text`` is not a readable trace (the first problems, naming each field), or
    None when it is one."""
    if text is None or not isinstance(text, str) or not text.strip():
        return "no agent trace stored"
    try:
        AgentTrace.model_validate_json(text)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(map(str, e['loc'])) or 'trace'}: {e['msg']}" for e in exc.errors()[:5]
        ]
        more = len(exc.errors()) - len(problems)
        return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
    except (ValueError, RecursionError) as exc:
        return f"not a JSON trace: {type(exc).__name__}"
    return None


def read_flags(trace: AgentTrace | None, *, seen: bool = False) -> dict[str, bool]:
    """Per constraint id, whether the agent opened its text (``seen``: or had it in its
    system message, ``preload``); empty without a trace."""
    if trace is None:
        return {}
    if not seen:
        return dict(trace.read)
    return {cid: flag or cid in trace.preloaded for cid, flag in trace.read.items()}


def read_any(trace: AgentTrace | None, *, seen: bool = False) -> bool:
    """Whether the agent opened at least one constraint's text (``seen``: or had one in
    its system message)."""
    return any(read_flags(trace, seen=seen).values())


def trace_value(text: str | None) -> Any:
    """A record's ``agent_json`` as the JSON value the results file carries: the parsed
    object when it is one, else None."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
