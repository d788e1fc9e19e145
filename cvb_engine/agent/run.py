"""The runner's side of an agent cell: workspace, episode (or command), trace, record.

:meth:`AgentRun.answer` is all the runner calls for a cell of an ``agent``
variant. The workspace lives in a temporary folder for the episode only; an
episode is one cell, so a kill mid-episode loses it whole and a resume runs it
again from a fresh workspace, and one cell is stored once whatever the number
of runners (the claims of :mod:`cvb_engine.claims`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cvb_engine.agent.command import CommandError, files_read, run_command
from cvb_engine.agent.episode import Send, run_episode
from cvb_engine.agent.tools import ToolBox
from cvb_engine.agent.trace import AgentTrace, CommandRun, EndedBy, ToolCall, WrittenFile
from cvb_engine.agent.workspace import Workspace, task_message
from cvb_engine.arms import ArmContext, parse_arm
from cvb_engine.arms.agent import workspace_of
from cvb_engine.cells import Finished
from cvb_engine.kinds import ErrorKind, RecordStatus
from cvb_engine.metrics import is_agent_arm
from cvb_engine.prompts import Message, messages_sha256
from cvb_engine.scenario import Scenario

__all__ = [
    "NO_TESTS",
    "AgentRun",
    "agent_arms_problem",
    "describe_agent_arm",
    "is_agent_arm",
    "run_workspace_tests",
]

#: A named file's final content is kept (and scored) up to this many characters.
MAX_SOLUTION_CHARS = 100_000
NO_TESTS = "There are no tests in this repository (no tests/test_*.py)."
TESTS_TIMEOUT_S = 10.0
_MARK = "@@cvb-run-tests@@"
MAX_SUMMARY_CHARS = 4_000


def agent_arms_problem(arms: Sequence[str]) -> str | None:
    """Why a run with ``arms`` cannot start (an ``agent@command`` arm and no working bwrap:
    no fallback), or None."""
    from cvb_engine.agent.command import bwrap_problem

    commands = [
        a for a in arms if is_agent_arm(a) and getattr(parse_arm(a).params, "command", None)
    ]
    if commands and (problem := bwrap_problem()):
        return f"arm {commands[0]} runs an agent program under bwrap, which does not work here: {problem}"
    return None


def describe_agent_arm(arm: str) -> str | None:
    """What one cell of ``arm`` does, for the dry run (None for other arms)."""
    if not is_agent_arm(arm):
        return None
    params: Any = parse_arm(arm).params
    where = f"rules={params.rules}" + (f", {params.load} distractors" if params.load else "")
    if params.command:
        from cvb_engine.agent.command import bwrap_problem

        problem = bwrap_problem()
        state = f"MISSING bwrap, the run will refuse to start: {problem}" if problem else "bwrap"
        return f"runs {params.command!r} in the workspace ({where}), up to {params.timeout:g}s a cell; {state}"
    return (
        f"an episode in the workspace ({where}{', preloaded' if params.preload else ''}): "
        f"up to {params.steps + 1} requests a cell ({params.steps} tool rounds)"
    )


@functools.lru_cache(maxsize=1)
def _program() -> str:
    return resources.files("cvb_engine.agent").joinpath("workspace_tests.py").read_text("utf-8")


def _python_files(root: Path, limit: int = 2_000_000) -> dict[str, str]:
    """The workspace's ``.py`` files (no link followed), path -> text, at most ``limit`` bytes."""
    out: dict[str, str] = {}
    total = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = Path(folder) / name
            if not name.endswith(".py") or full.is_symlink():
                continue
            data = full.read_bytes()
            total += len(data)
            if total > limit:
                return out
            out[full.relative_to(root).as_posix()] = data.decode("utf-8", "replace")
    return out


async def run_workspace_tests(root: Path, backend: str | None = None) -> str:
    """``run_tests``: the workspace's ``tests/`` run in the sandbox, as a bounded summary.
    Model code runs only there; a sandbox that cannot run says so (never the host)."""
    from cvb_engine import sandbox

    sources = _python_files(root)
    if not any(p.startswith("tests/") and p.rsplit("/", 1)[-1].startswith("test") for p in sources):
        return NO_TESTS
    test = f"_cvb_run_tests({sources!r})"
    try:
        result = await asyncio.to_thread(
            sandbox.run_python, _program(), test, timeout_s=TESTS_TIMEOUT_S, backend_name=backend
        )
    except sandbox.SandboxError as exc:
        return f"run_tests is unavailable: {exc}"[:MAX_SUMMARY_CHARS]
    if _MARK in result.stdout:
        summary = result.stdout.rsplit(_MARK, 1)[1].strip()
    else:
        summary = f"the tests did not finish: {result.reason}"
        if result.stderr.strip():
            summary += "\n" + result.stderr.strip()[-1_500:]
    return summary[:MAX_SUMMARY_CHARS]


def _final_files(root: Path, ws: Workspace) -> tuple[WrittenFile, ...]:
    """The named files whose content is no longer the stub: what the agent wrote."""
    out = []
    for rel in ws.targets:
        full = root / rel
        try:
            info = os.lstat(full)
            if not stat.S_ISREG(info.st_mode):
                continue  # a link or a folder left by a command is not a solution
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(MAX_SOLUTION_CHARS * 4)
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if text == ws.stubs.get(rel):
            continue
        out.append(
            WrittenFile(
                path=rel,
                content=text[:MAX_SOLUTION_CHARS],
                size=info.st_size,
                cut=len(text) > MAX_SOLUTION_CHARS or len(data) < info.st_size,
            )
        )
    return tuple(out)


def _read_flags(
    scenario: Scenario, calls: list[ToolCall], read_paths: set[str], ws: Workspace
) -> dict[str, bool]:
    shown = {cid for call in calls for cid in call.shown}
    shown |= {p.constraint_id for p in ws.constraints if p.path in read_paths}
    return {c.id: c.id in shown for c in scenario.constraints}


@dataclass
class AgentRun:
    """What a run's agent cells share: the memory pool, the sandbox for ``run_tests``, and
    the folder a command's relative program path is taken from."""

    arm_context: ArmContext
    sandbox_backend: str | None = None
    cwd: Path = field(default_factory=Path.cwd)

    async def tests(self, root: Path) -> str:
        return await run_workspace_tests(root, self.sandbox_backend)

    async def answer(self, scenario: Scenario, arm: str, model: str, send: Send) -> Finished:
        """Run the cell's episode (or command) in a fresh workspace; its record, with the trace."""
        variant = parse_arm(arm)
        params: Any = variant.params
        ws = workspace_of(scenario, params, self.arm_context)
        messages = [
            Message(role=m["role"], content=m["content"])
            for m in variant.build(scenario, self.arm_context)
        ]
        digest = messages_sha256(messages)
        with tempfile.TemporaryDirectory(prefix="cvb-agent-", ignore_cleanup_errors=True) as tmp:
            root = Path(tmp) / "repo"
            root.mkdir()
            atimes = ws.write(root)
            calls: list[ToolCall] = []
            read_paths: set[str] = set()
            command: CommandRun | None = None
            if params.command:
                finished, command, ended = await self._command(
                    params, root, Path(tmp), ws, scenario, model
                )
                if command is not None and command.reads_observed:
                    read_paths = files_read(root, [r.path for r in ws.rules_files], atimes)
                steps = requests = cut = 0
                final_text = None
                prompt_tokens = completion_tokens = None
                latency = command.time_s if command else None
            else:
                box = ToolBox(root, ws.constraints, run_tests=self.tests)
                episode = await run_episode(messages, root, box, send, params.steps)
                finished, calls, ended = episode.finished, episode.calls, episode.ended_by
                steps, requests, cut = episode.steps, episode.requests, episode.replies_cut
                final_text = episode.final_text
                prompt_tokens, completion_tokens = episode.prompt_tokens, episode.completion_tokens
                latency = episode.latency_s
            files = _final_files(root, ws)
        preloaded = (
            tuple(p.constraint_id for p in ws.constraints if p.path == ws.root_rules)
            if params.preload and not params.command
            else ()
        )
        trace = AgentTrace(
            transport="command" if params.command else "tools",
            variant=variant.name,
            params={k: getattr(params, k) for k in type(params).model_fields},
            workspace_sha256=ws.sha256,
            targets=ws.targets,
            rules_files=ws.rules_files,
            constraints=ws.constraints,
            preload=bool(params.preload),
            preloaded=preloaded,
            task=task_message(scenario, ws.targets),
            calls=tuple(calls),
            files=files,
            steps=steps,
            requests=requests,
            replies_cut=cut,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            ended_by=ended,
            final_text=final_text,
            read=_read_flags(scenario, calls, read_paths, ws),
            command=command,
            error=finished.error if finished.status != RecordStatus.OK else None,
        )
        finished.messages_sha256 = digest
        finished.agent_json = trace.to_json()
        # what the rules files delivered, as the incentivized arm's records store it
        if params.stale is not None or params.budget is not None:
            finished.memory_json = json.dumps(ws.delivery, sort_keys=True)
        return finished

    async def _command(
        self, params: Any, root: Path, tmp: Path, ws: Workspace, scenario: Scenario, model: str
    ) -> tuple[Finished, CommandRun | None, EndedBy]:
        home = tmp / "home"
        home.mkdir()
        task = task_message(scenario, ws.targets)
        try:
            run = await run_command(
                params.command,
                root,
                home,
                task,
                timeout_s=params.timeout,
                targets=ws.targets,
                model=model,
                env_names=params.env_names,
                cwd=self.cwd,
            )
        except (CommandError, OSError) as exc:
            return _failed(f"agent command could not run: {exc}"), None, "error"
        ended: EndedBy = (
            "timeout" if run.timed_out else ("answer" if run.exit_code == 0 else "error")
        )
        finished = Finished(
            cell=("", "", "", 0),
            status=RecordStatus.OK,
            response=run.stdout,
            error=None,
            latency_s=run.time_s,
            prompt_tokens=None,
            completion_tokens=None,
            finish_reason=None,
            attempts=1,
            messages_sha256="",
        )
        return finished, run, ended


def _failed(message: str) -> Finished:
    return Finished(
        cell=("", "", "", 0),
        status=RecordStatus.ERROR,
        response=None,
        error=message[:2_000],
        latency_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        finish_reason=None,
        attempts=1,
        messages_sha256="",
        error_kind=ErrorKind.API,
    )
