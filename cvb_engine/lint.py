"""Scenario lint (DESIGN §4): every rule has its own code and a ``file:line`` anchor.

=====  ========  ===============================================================
code   severity  rule
=====  ========  ===============================================================
E001   error     the file cannot be read as safe YAML (encoding, binary, tags,
                 aliases, duplicate keys, syntax)
E002   error     schema: a field is missing, misspelt or of the wrong type
E003   error     the same scenario id in two files
E004   error     the id differs from the file name
E005   error     unknown category
E006   error     unknown check kind
E007   error     a regex that does not compile (or other invalid check parameters)
E008   error     a check disagrees with its constraint's samples
E009   error     a constraint has no violating or no compliant samples
E010   error     imperative wording in constraint text (the incentivized arm must
                 stay non-directive)
E011   error     a check's pattern timed out on one of its own samples
E012   error/    a CVB category does not hold exactly 5 scenarios (an error for
       warning   the shipped set, a warning while authoring)
W013   warning   fewer than 3 violating or 3 compliant samples for a constraint
W014   warning   the scenario file does not carry the canary string
W016   warning   imperative wording in the task or stated tests (they are quoted in
                 the incentivized prompt, which stays free of orders)
E015   error     an IVR problem without stated tests, source or reference
                 solution, or with a constraint that has no ``exec`` check
E017   error     a CVB scenario with fewer than 2 or more than 4 constraints
                 (DESIGN §3; IVR problems are exempt)
=====  ========  ===============================================================
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cvb_engine.checks.base import CheckResult, Subject, get_kind
from cvb_engine.scenario import (
    CANARY,
    CVB_CATEGORIES,
    LoadedScenario,
    Problem,
    Scenario,
    ScenarioError,
    discover,
    load_file,
    load_text,
)

#: Words and phrases that turn a fact into an order. The incentivized arm quotes
#: constraint text verbatim, so none of these may appear in it.
IMPERATIVE_WORDS: tuple[str, ...] = (
    "must",
    "mustn't",
    "must not",
    "required",
    "require",
    "requires",
    "requirement",
    "rule",
    "rules",
    "you should",
    "should",
    "shouldn't",
    "never",
    "always",
    "do not",
    "don't",
    "does not need to",
    "have to",
    "has to",
    "need to",
    "needs to",
    "shall",
    "mandatory",
    "forbidden",
    "forbid",
    "prohibited",
    "ought to",
    "make sure",
    "be sure to",
    "obligatory",
)
IMPERATIVE_RE = re.compile(
    r"(?<![\w'’-])("
    + "|".join(
        re.escape(w).replace("'", "['’]").replace(re.escape(" "), r"\s+")
        for w in sorted(IMPERATIVE_WORDS, key=len, reverse=True)
    )
    + r")(?![\w'’-])",
    re.IGNORECASE,
)
MIN_SAMPLES = 3
SHIPPED_PER_CATEGORY = 5
# Budget for running checks against samples: a lint pass over a malicious file
# must finish in well under the 10 s a user would wait.
SAMPLE_TIME_BUDGET_S = 4.0
EXEC_SAMPLE_BUDGET_S = 0.5
MAX_SAMPLE_BUDGET_S = 6.0


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        """``file:line: CODE message`` on one line: line breaks in a message (a key
        or a name quoted from the file) are shown as ``\\n``."""
        note = "warning: " if self.severity == "warning" else ""
        message = self.message.replace("\r", "\\r").replace("\n", "\\n")
        return f"{self.path}:{self.line}: {self.code} {note}{message}"

    @classmethod
    def from_problem(cls, problem: Problem) -> Finding:
        message = f"{problem.field}: {problem.message}" if problem.field else problem.message
        return cls(problem.path, max(problem.line, 1), problem.code, message)


def imperative_words(text: str) -> list[str]:
    """The imperative words/phrases found in ``text`` (lower-cased, in order)."""
    return [m.group(1).lower() for m in IMPERATIVE_RE.finditer(text)]


def _budget(scenario: Scenario) -> float:
    """Seconds allowed for running a scenario's checks on its samples.

    Pure-text checks get a flat budget; executed checks (one sandboxed process
    per sample, two at a time) get time in proportion to their samples.
    """
    executed = sum(
        len(c.samples.violating) + len(c.samples.compliant)
        for c in scenario.constraints
        if any((k := get_kind(spec.kind)) is not None and k.executes_code for spec in c.checks)
    )
    return min(SAMPLE_TIME_BUDGET_S + EXEC_SAMPLE_BUDGET_S * executed, MAX_SAMPLE_BUDGET_S)


MIN_CONSTRAINTS, MAX_CONSTRAINTS = 2, 4


def lint_scenario(item: LoadedScenario, *, deadline: float | None = None) -> list[Finding]:
    """Rules that concern one scenario on its own (E004, E008–E011, W013, W014, E017)."""
    findings: list[Finding] = []
    sc = item.scenario
    path = str(item.path)
    if item.path.suffix in (".yaml", ".yml") and item.path.stem != sc.id:
        findings.append(
            Finding(
                path,
                item.line_of("id"),
                "E004",
                f"id {sc.id!r} differs from the file name {item.path.name!r}",
            )
        )
    if sc.category != "ivr" and sc.canary != CANARY:
        findings.append(
            Finding(
                path,
                item.line_of("canary"),
                "W014",
                f"canary missing or wrong; expected {CANARY!r}",
                "warning",
            )
        )
    for name in ("task", "stated_tests"):
        words = dict.fromkeys(imperative_words(getattr(sc, name) or ""))
        if words:
            findings.append(
                Finding(
                    path,
                    item.line_of(name),
                    "W016",
                    f"{name} contains {', '.join(map(repr, words))}, which the incentivized prompt "
                    "would quote; rephrase it as a description",
                    "warning",
                )
            )
    if sc.category == "ivr":
        findings.extend(_ivr_findings(item))
    elif not MIN_CONSTRAINTS <= len(sc.constraints) <= MAX_CONSTRAINTS:
        findings.append(
            Finding(
                path,
                item.line_of("constraints"),
                "E017",
                f"a CVB scenario has {MIN_CONSTRAINTS}–{MAX_CONSTRAINTS} constraints; this one has "
                f"{len(sc.constraints)}",
            )
        )
    if deadline is None:
        deadline = time.monotonic() + _budget(sc)
    for ci, constraint in enumerate(sc.constraints):
        cloc = ("constraints", ci)
        for word in dict.fromkeys(imperative_words(constraint.text)):
            findings.append(
                Finding(
                    path,
                    item.line_of(*cloc, "text"),
                    "E010",
                    f"constraint {constraint.id!r}: imperative wording {word!r}; state the constraint "
                    "as a fact of project memory, not as an order",
                )
            )
        samples = constraint.samples
        if not samples.violating or not samples.compliant:
            missing = " and ".join(
                kind
                for kind, s in (("violating", samples.violating), ("compliant", samples.compliant))
                if not s
            )
            findings.append(
                Finding(
                    path,
                    item.line_of(*cloc, "samples"),
                    "E009",
                    f"constraint {constraint.id!r} has no {missing} samples",
                )
            )
        elif len(samples.violating) < MIN_SAMPLES or len(samples.compliant) < MIN_SAMPLES:
            findings.append(
                Finding(
                    path,
                    item.line_of(*cloc, "samples"),
                    "W013",
                    f"constraint {constraint.id!r} has {len(samples.violating)} violating and "
                    f"{len(samples.compliant)} compliant samples; {MIN_SAMPLES} of each make a check credible",
                    "warning",
                )
            )
        findings.extend(_sample_findings(item, ci, deadline))
    return findings


def _ivr_findings(item: LoadedScenario) -> list[Finding]:
    sc = item.scenario
    path = str(item.path)
    out = []
    for name in ("stated_tests", "source", "reference_solution", "gold"):
        if not (getattr(sc, name) or "").strip():
            out.append(
                Finding(path, item.line_of("category"), "E015", f"IVR problem without {name}")
            )
    for ci, c in enumerate(sc.constraints):
        if not any(spec.kind == "exec" for spec in c.checks):
            out.append(
                Finding(
                    path,
                    item.line_of("constraints", ci),
                    "E015",
                    f"IVR constraint {c.id!r} has no exec check (a hidden test)",
                )
            )
    return out


def _sample_findings(item: LoadedScenario, ci: int, deadline: float) -> list[Finding]:
    """E008/E011: every violating sample fails ≥1 check; every compliant sample passes all.

    Samples of a constraint whose checks execute code (``exec``) run two at a
    time: each is a sandboxed child process, so threads overlap their waits.
    """
    constraint = item.scenario.constraints[ci]
    path = str(item.path)
    findings: list[Finding] = []
    checks = [(get_kind(spec.kind), spec.params()) for spec in constraint.checks]
    jobs = [
        (label, si, sample)
        for label, samples in (
            ("violating", constraint.samples.violating),
            ("compliant", constraint.samples.compliant),
        )
        for si, sample in enumerate(samples)
    ]

    def evaluate(sample: str) -> list[tuple[int, CheckResult]] | None:
        """The sample's results, or None when the budget runs out first."""
        subject = Subject(code=sample, response=sample)
        results = []
        for k, (kind, params) in enumerate(checks):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if kind is not None:
                # A check that executes the sample waits at most what is left of
                # the budget: a looping sample under a 60 s timeout must not hold
                # lint for a minute.
                capped = kind.executes_code and getattr(params, "timeout_s", 0) > remaining
                run = params.model_copy(update={"timeout_s": remaining}) if capped else params
                result = kind.run(run, subject)
                if capped and result.timed_out:
                    return None
                results.append((k, result))
                if result.timed_out:
                    break
        return results

    if any(kind is not None and kind.executes_code for kind, _ in checks) and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="cvb-lint") as pool:
            outcomes = list(pool.map(evaluate, [sample for _, _, sample in jobs]))
    else:
        outcomes = []
        for _, _, sample in jobs:
            outcomes.append(evaluate(sample))
            if outcomes[-1] is None:
                break
    for (label, si, _sample), results in zip(jobs, outcomes, strict=False):
        line = item.line_of("constraints", ci, "samples", label, si)
        if results is None:
            findings.append(
                Finding(
                    path,
                    line,
                    "E011",
                    f"constraint {constraint.id!r}: checking samples took too long; stopped here",
                )
            )
            return findings
        for k, result in results:
            if result.timed_out:
                kind_name = constraint.checks[k].kind
                advice = (
                    "rewrite it without nested or overlapping repetition"
                    if kind_name == "regex"
                    else "the check ran past its timeout"
                )
                findings.append(
                    Finding(
                        path,
                        item.line_of("constraints", ci, "checks", k),
                        "E011",
                        f"constraint {constraint.id!r} check {constraint.check_ids()[k]} ({kind_name}) "
                        f"timed out on {label} sample {si + 1}; {advice}",
                    )
                )
                return findings
        failing = [k for k, r in results if not r.passed]
        if label == "violating" and not failing:
            findings.append(
                Finding(
                    path,
                    line,
                    "E008",
                    f"constraint {constraint.id!r}: violating sample {si + 1} passes every check",
                )
            )
        if label == "compliant":
            for k in failing:
                reason = dict(results)[k].reason
                findings.append(
                    Finding(
                        path,
                        line,
                        "E008",
                        f"constraint {constraint.id!r}: compliant sample {si + 1} fails check "
                        f"{constraint.check_ids()[k]} ({reason})",
                    )
                )
    return findings


def lint_set(items: list[LoadedScenario], *, shipped: bool) -> list[Finding]:
    """Rules across files: duplicate ids (E003) and the per-category count (E012)."""
    findings: list[Finding] = []
    by_id: dict[str, list[LoadedScenario]] = defaultdict(list)
    for item in items:
        by_id[item.scenario.id].append(item)
    for sid, group in sorted(by_id.items()):
        if len(group) > 1:
            first = group[0]
            for dup in group[1:]:
                findings.append(
                    Finding(
                        str(dup.path),
                        dup.line_of("id"),
                        "E003",
                        f"duplicate scenario id {sid!r} (also in {first.path}:{first.line_of('id')})",
                    )
                )
    counts: Counter[str] = Counter(
        str(item.scenario.category) for item in items if item.scenario.category in CVB_CATEGORIES
    )
    for category in CVB_CATEGORIES:
        if category in counts and counts[category] != SHIPPED_PER_CATEGORY:
            members = sorted(
                (i for i in items if i.scenario.category == category), key=lambda i: str(i.path)
            )
            anchor = members[-1]
            findings.append(
                Finding(
                    str(anchor.path),
                    anchor.line_of("category"),
                    "E012",
                    f"category {category!r} holds {counts[category]} scenarios; the CVB set has exactly "
                    f"{SHIPPED_PER_CATEGORY} per category",
                    "error" if shipped else "warning",
                )
            )
    if shipped:
        for category in CVB_CATEGORIES:
            if category not in counts and counts:
                findings.append(
                    Finding(
                        str(items[0].path.parent.parent),
                        1,
                        "E012",
                        f"category {category!r} holds 0 scenarios; the CVB set has exactly {SHIPPED_PER_CATEGORY}",
                    )
                )
    return findings


def lint_paths(paths: Iterable[str | Path], *, shipped: bool | None = None) -> list[Finding]:
    """Lint files and directories. A directory is linted as a set; ``shipped``
    decides whether E012 is an error (default: True when a directory is given)."""
    paths = list(paths)
    if shipped is None:
        shipped = any(Path(p).is_dir() for p in paths)
    findings: list[Finding] = []
    loaded: list[LoadedScenario] = []
    files = discover(paths)
    if not files:
        return [Finding(str(p), 1, "E001", "no scenario files found") for p in paths]
    for f in files:
        try:
            item = load_file(f)
        except ScenarioError as exc:
            findings.extend(Finding.from_problem(p) for p in exc.problems)
            continue
        loaded.append(item)
        findings.extend(lint_scenario(item))
    findings.extend(lint_set(loaded, shipped=shipped))
    return sorted(findings, key=lambda f: (f.path, f.line, f.code))


def executes_samples(paths: Iterable[str | Path]) -> bool:
    """Whether linting ``paths`` runs samples through a check that executes code, so
    that ``cvb lint`` can refuse before the first execution when no sandbox works.
    Files that do not load execute nothing (lint reports them)."""
    for f in discover(list(paths)):
        try:
            item = load_file(f)
        except ScenarioError:
            continue
        for constraint in item.scenario.constraints:
            for spec in constraint.checks:
                kind = get_kind(spec.kind)
                if kind is not None and kind.executes_code:
                    return True
    return False


def lint_text(
    text: str, path: str | Path, *, library: Iterable[LoadedScenario] = ()
) -> tuple[LoadedScenario | None, list[Finding]]:
    """Lint one scenario given as text (the studio's editor), against a library for
    the cross-file rules (the count rule is a warning while authoring)."""
    try:
        item = load_text(text, path)
    except ScenarioError as exc:
        return None, [Finding.from_problem(p) for p in exc.problems]
    findings = lint_scenario(item)
    others = [o for o in library if o.path.resolve() != Path(path).resolve()]
    findings.extend(f for f in lint_set([*others, item], shipped=False) if f.path == str(item.path))
    return item, sorted(findings, key=lambda f: (f.line, f.code))


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
