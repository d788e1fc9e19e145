"""The result of one execution, and the reason it states, from the verdict and the exit."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from cvb_engine.sandbox.channel import ResultChannel, Stream
from cvb_engine.sandbox.limits import Limits


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one execution.

    ``reason`` is the failing assertion or exception with the line it came from,
    ``"timed out after 5s"``, ``"killed by SIGKILL"``…, or ``"passed (0.04s)"``.
    ``test_line`` / ``solution_line`` locate the failure (1-based) when known.
    ``phase`` is how far the harness got: ``start`` (before the solution ran),
    ``solution``, ``test`` or ``done``.
    """

    passed: bool
    reason: str
    duration_s: float
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    backend: str = ""
    exit_code: int | None = None
    phase: str = "start"
    test_line: int | None = None
    solution_line: int | None = None


def finish(
    *,
    code: str,
    test: str,
    name: str,
    channel: ResultChannel,
    out: Stream,
    err: Stream,
    timed_out: bool,
    flooded: bool,
    duration: float,
    returncode: int | None,
    timeout_s: float,
    limits: Limits,
) -> ExecResult:
    """The result of one execution, from what the harness reported and how it ended."""
    verdict = channel.verdict
    phase = verdict.phase or "start"
    failure = verdict.failure or {}
    test_line = failure.get("line_test")
    solution_line = failure.get("line_solution")
    passed = False
    if timed_out:
        reason = f"timed out after {timeout_s:g}s"
    elif flooded:
        reason = f"output limit exceeded: more than {_mib(limits.output_limit_bytes)} written"
    elif verdict.passed:
        passed = True
        reason = f"passed ({duration:.2f}s)"
        phase = "done"
    elif verdict.failure is not None:
        reason = _failure_reason(verdict.failure, code, test)
    else:
        reason = _exit_reason(returncode, verdict.phase)
    return ExecResult(
        passed=passed,
        reason=reason,
        duration_s=duration,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        backend=name,
        exit_code=returncode,
        phase=phase,
        test_line=test_line if isinstance(test_line, int) else None,
        solution_line=solution_line if isinstance(solution_line, int) else None,
    )


def _line_text(source: str, line: object) -> str:
    if not isinstance(line, int) or line < 1:
        return ""
    lines = source.splitlines()
    if line > len(lines):
        return ""
    text = lines[line - 1].strip()
    return text if len(text) <= 120 else text[:117] + "..."


def _failure_reason(failure: dict[str, object], code: str, test: str) -> str:
    exc = str(failure.get("exc", "error"))
    msg = " ".join(str(failure.get("msg", "")).split())
    if len(msg) > 300:
        msg = msg[:297] + "..."
    head = f"{exc}: {msg}" if msg else exc
    if exc == "MemoryError":
        head += " (memory limit reached)"
    where = failure.get("where")
    solution_at = _at("solution", failure.get("line_solution"), code)
    test_at = _at("test", failure.get("line_test"), test)
    if where == "compile-solution":
        return f"solution does not compile: {head}{solution_at}"
    if where == "compile-test":
        return f"test does not compile: {head}{test_at}"
    if where == "solution":
        return f"solution raised {head}{solution_at}"
    if exc == "AssertionError" and test_at and not solution_at:
        # the test's own assertion: its line says more than the (usually empty) message
        return f"AssertionError{test_at}" + (f" ({msg})" if msg else "")
    if solution_at and test_at:
        return f"{head}{solution_at} (called{test_at.replace(' at ', ' from ', 1)})"
    if solution_at or test_at:
        return f"{head}{solution_at or test_at}"
    inner = failure.get("inner")
    return f"{head} (in {inner})" if inner else head


def _at(label: str, line: object, source: str) -> str:
    """`` at test line 3: assert f(1) == 2`` — or empty when the line is unknown."""
    if not isinstance(line, int):
        return ""
    text = _line_text(source, line)
    return f" at {label} line {line}" + (f": {text}" if text else "")


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _exit_reason(returncode: int | None, phase: str) -> str:
    when = {
        "start": "before the solution ran",
        "solution": "while the solution ran",
        "test": "during the test",
    }.get(phase, "before the harness started")
    if returncode is None:
        return f"no verdict from the harness {when}"
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if sig:
        if sig == signal.SIGXCPU:
            return f"killed: CPU time limit {when}"
        return f"killed by {_signal_name(sig)} {when}"
    return f"exited with status {returncode} {when}, without a verdict"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"
