"""The ``exec`` check kind: a test executed against the extracted code, in the sandbox.

The ``test`` runs after the solution in the same module namespace (HumanEval's
``check`` convention) and passes when it returns normally::

    - kind: exec
      test: |
        assert add(2, 3) == 5
        assert add(-1, 1) == 0
      timeout_s: 5

Execution goes through :mod:`cvb_engine.sandbox` (child process, temporary
directory, rlimits, no network, timeout). The reason of a failure is the
failing assertion with its test line, or the exception with the solution line
it came from; evidence points at that solution line when there is one. A test
that does not compile is the author's error and is rejected when the scenario
is loaded (compiled, never run).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cvb_engine import sandbox
from cvb_engine.checks.base import CheckResult, Sibling, Span, Subject, register_check

DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 60.0


class Params(BaseModel):
    """Parameters of an ``exec`` check."""

    model_config = ConfigDict(extra="forbid")

    test: str = Field(
        description="Python run after the solution in the same namespace; passes if it returns"
    )
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)

    @field_validator("test")
    @classmethod
    def _compiles(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("test is empty: it would pass every solution")
        try:
            compile(value, "<test>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise ValueError(f"test does not compile: {exc.msg} (test line {exc.lineno})") from None
        except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
            raise ValueError(f"test does not compile: {type(exc).__name__}: {exc}") from None
        return value


class PreparedExec:
    """An ``exec`` check made ready: its parameters and the key under which a subject
    keeps its verdict (stated tests and a hidden test may be the same text: it runs
    once per subject). Every verdict depends on the code, so none is shared."""

    __slots__ = ("key", "params", "shared")

    def __init__(self, params: Params, siblings: Sequence[Sibling] = ()) -> None:
        self.params = params
        self.key = f"exec:{params.timeout_s}:{params.test}"
        self.shared: tuple[CheckResult, ...] = ()

    def run(self, subject: Subject) -> CheckResult:
        """Execute ``subject.code`` then the test. Never raises."""
        params = self.params
        cached = subject.cache.get(self.key)
        if isinstance(cached, CheckResult):
            return cached
        try:
            result = sandbox.run_python(subject.code, params.test, timeout_s=params.timeout_s)
        except (sandbox.SandboxError, OSError) as exc:
            # The machine, not the code: not cached, so a later retry can succeed.
            return CheckResult(passed=False, reason=f"sandbox unavailable: {exc}")
        except Exception as exc:  # lint calls kinds directly: a sandbox bug must not stop it
            return CheckResult(passed=False, reason=f"sandbox error: {type(exc).__name__}: {exc}")
        evidence: tuple[Span, ...] = ()
        if not result.passed and result.solution_line is not None:
            lines = subject.code.splitlines()
            if 0 < result.solution_line <= len(lines):
                text = lines[result.solution_line - 1].rstrip()
                indent = len(text) - len(text.lstrip())
                evidence = (Span(result.solution_line, indent, max(1, len(text) - indent)),)
        verdict = CheckResult(
            passed=result.passed,
            reason=result.reason,
            evidence=evidence,
            timed_out=result.timed_out,
        )
        subject.cache[self.key] = verdict
        return verdict


@register_check(
    "exec",
    params=Params,
    prepare=PreparedExec,
    description="A test run after the code in the same namespace, in the sandbox (child process, "
    "no network, rlimits, timeout); passes when the test returns without an exception.",
    executes_code=True,
)
def run_exec(params: Params, subject: Subject) -> CheckResult:
    """Execute ``subject.code`` then ``params.test`` (prepared for this subject alone).
    Never raises."""
    return PreparedExec(params).run(subject)
