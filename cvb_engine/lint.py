"""Scenario lint (README: Authoring scenarios): every rule has its own code and a ``file:line`` anchor.

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
                 (README: Authoring scenarios; IVR problems are exempt)
E024   error     imperative wording in a constraint's ``superseded`` note (the
                 words E010 refuses: ``stale=`` arms quote it as memory)
E025   error     a ``superseded`` note that repeats its constraint's text (once
                 case, punctuation and spacing are set aside, or nearly all its
                 words), so it states no earlier decision
E026   error     a ``superseded`` note that does not start with its date
                 (``YYYY-MM: ``) or is dated at or after the current notes' date
E027   error/    a CVB constraint without a ``superseded`` note (an error for the
       warning   shipped library, a warning for a team's own scenarios)
=====  ========  ===============================================================

The project-memory pool (``memory/pool.yaml``, README: Memory arms) is not a scenario;
it is linted with codes of its own (E001/E002 when it cannot be loaded):

=====  ========  ===============================================================
E020   error     imperative wording in an entry (the words E010 refuses)
E021   error     an entry names something a shipped constraint's checks forbid
                 or require, or one of their regex patterns matches it
E022   error     an entry id used twice, or a text that repeats another once case,
                 punctuation and spacing are set aside (or shares nearly all its
                 words with it)
E023   error     an unknown kind, or a text shorter or longer than an entry is
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

from pydantic import BaseModel

from cvb_engine.arms import DEFAULT_POOL
from cvb_engine.checks import python_ast, regex_check
from cvb_engine.checks.base import CheckResult, Subject, get_kind
from cvb_engine.memory_notes import CURRENT_AS_OF, SUPERSEDED_DATE
from cvb_engine.memory_pool import Pool, PoolError, discover_pools, load_pool
from cvb_engine.scenario import (
    CANARY,
    CVB_CATEGORIES,
    Constraint,
    LoadedScenario,
    Problem,
    Scenario,
    ScenarioError,
    constraint_executes_code,
    discover,
    load_all,
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


def sample_budget(scenario: Scenario) -> float:
    """Seconds allowed for running a scenario's checks on its samples.

    Pure-text checks get a flat budget; executed checks (one sandboxed process
    per sample, two at a time) get time in proportion to their samples.
    """
    executed = sum(
        len(c.samples.violating) + len(c.samples.compliant)
        for c in scenario.constraints
        if constraint_executes_code(c)
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
        deadline = time.monotonic() + sample_budget(sc)
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
        findings.extend(_superseded_findings(item, ci))
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


@dataclass(frozen=True)
class SampleRun:
    """One labelled sample of a constraint run against that constraint's checks."""

    label: str  # "violating" | "compliant"
    index: int  # 0-based, within its label
    code: str
    # (check index, result) per check run, stopping at a timed-out one; None when the
    # time budget ran out before the sample was judged
    results: list[tuple[int, CheckResult]] | None


def run_samples(constraint: Constraint, deadline: float) -> list[SampleRun]:
    """Every sample of ``constraint`` against its own checks, within ``deadline``.

    The one implementation of the sample rule: lint (E008/E011) and the Author page's
    sample verdicts both read it. Samples of a constraint whose checks execute code
    (``exec``) run two at a time: each is a sandboxed child process, so threads overlap
    their waits. A sample the budget did not reach has ``results`` None.
    """
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

    outcomes: list[list[tuple[int, CheckResult]] | None]
    if any(kind is not None and kind.executes_code for kind, _ in checks) and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="cvb-lint") as pool:
            outcomes = list(pool.map(evaluate, [sample for _, _, sample in jobs]))
    else:
        outcomes = []
        for _, _, sample in jobs:
            # once the budget is spent, the rest are not run at all
            outcomes.append(None if outcomes and outcomes[-1] is None else evaluate(sample))
    return [
        SampleRun(label, si, sample, results)
        for (label, si, sample), results in zip(jobs, outcomes, strict=True)
    ]


def _sample_findings(item: LoadedScenario, ci: int, deadline: float) -> list[Finding]:
    """E008/E011: every violating sample fails ≥1 check; every compliant sample passes all."""
    constraint = item.scenario.constraints[ci]
    path = str(item.path)
    findings: list[Finding] = []
    for run in run_samples(constraint, deadline):
        label, si, results = run.label, run.index, run.results
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


def _superseded_findings(item: LoadedScenario, ci: int) -> list[Finding]:
    """E024–E026 on one constraint's ``superseded`` note, when it has one."""
    constraint = item.scenario.constraints[ci]
    note = constraint.superseded
    if note is None:
        return []
    path, line = str(item.path), item.line_of("constraints", ci, "superseded")
    out = [
        Finding(
            path,
            line,
            "E024",
            f"constraint {constraint.id!r}: superseded note has imperative wording {word!r}; "
            "state the earlier practice as what the team did at the time",
        )
        for word in dict.fromkeys(imperative_words(note))
    ]
    dated = SUPERSEDED_DATE.match(" ".join(note.split()))
    if dated is None:
        out.append(
            Finding(
                path,
                line,
                "E026",
                f"constraint {constraint.id!r}: superseded note does not start with its date "
                "('YYYY-MM: ' or 'YYYY-MM-DD: ')",
            )
        )
    elif dated.group(1)[:7] >= CURRENT_AS_OF:
        out.append(
            Finding(
                path,
                line,
                "E026",
                f"constraint {constraint.id!r}: superseded note dated {dated.group(1)}, not before "
                f"{CURRENT_AS_OF}, the date the current notes carry beside it",
            )
        )
    body = note[dated.end() - 1 :] if dated else note
    old, new = _normalised(body), _normalised(constraint.text)
    old_words, new_words = set(old.split()), set(new.split())
    overlap = len(old_words & new_words) / max(1, min(len(old_words), len(new_words)))
    if old == new or overlap >= NEAR_REPEAT:
        out.append(
            Finding(
                path,
                line,
                "E025",
                f"constraint {constraint.id!r}: superseded note repeats the constraint's text; "
                "it states the decision this one replaced",
            )
        )
    return out


#: Share of the shorter text's words that makes a superseded note a repeat of its constraint.
NEAR_REPEAT = 0.9


#: The shipped scenario library: where a constraint without a superseded note is an error
#: (E027); in a team's own folder it is a warning.
SHIPPED_LIBRARY = DEFAULT_POOL.parent.parent


def _in_shipped_library(path: Path) -> bool:
    try:
        path.resolve().relative_to(SHIPPED_LIBRARY.resolve())
    except (OSError, ValueError):
        return False
    return True


def lint_set(items: list[LoadedScenario], *, shipped: bool) -> list[Finding]:
    """Rules across files: duplicate ids (E003), the per-category count (E012), and a
    superseded note on every CVB constraint (E027: an error for the shipped library linted
    as a set, a warning for any other file)."""
    findings: list[Finding] = []
    for item in items:
        if item.scenario.category not in CVB_CATEGORIES:
            continue  # IVR problems state a task's intent, not a decision that replaced another
        required = shipped and _in_shipped_library(item.path)
        for ci, c in enumerate(item.scenario.constraints):
            if c.superseded is None:
                findings.append(
                    Finding(
                        str(item.path),
                        item.line_of("constraints", ci, "id"),
                        "E027",
                        f"constraint {c.id!r} has no superseded note (the earlier decision it "
                        "replaced, dated: 'YYYY-MM: ...'), which stale= arms show",
                        "error" if required else "warning",
                    )
                )
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
    pools = discover_pools(paths)
    if not files and not pools:
        return [Finding(str(p), 1, "E001", "no scenario files found") for p in paths]
    for f in files:
        try:
            item = load_file(f)
        except ScenarioError as exc:
            findings.extend(Finding.from_problem(p) for p in exc.problems)
            continue
        loaded.append(item)
        findings.extend(lint_scenario(item))
    if files:
        findings.extend(lint_set(loaded, shipped=shipped))
    for pool_path in pools:
        findings.extend(lint_pool_file(pool_path, _library_of(pool_path, loaded)))
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


# --------------------------------------------------------------------------- memory pool

POOL_MIN_WORDS, POOL_MAX_WORDS = 8, 45
# Two entries sharing this much of their vocabulary (Jaccard index of their word
# sets) read as one note told twice.
NEAR_DUPLICATE_WORDS = 0.8
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Escapes, character classes, group openers and counted repeats of a pattern's
# source: what is left between them is literal text.
_PATTERN_SYNTAX = re.compile(
    r"\\.|\[(?:\\.|[^\]\\])*\]|\(\?(?:P<\w+>|P=\w+\)|<?[=!]|[a-zA-Z-]*[:)])|\{[\d,]*\}"
)


def distinctive(word: str) -> bool:
    """Whether one name component reads as a name rather than an English word:
    it has an underscore or a digit, or a capital after a lower-case letter
    (``basicConfig``, ``TestCase``). ``get``, ``open`` or ``Session`` do not."""
    if len(word) < 3 or not any(c.isalpha() for c in word):
        return False
    return "_" in word or any(c.isdigit() for c in word) or bool(re.search(r"[a-z][A-Z]", word))


def _words_of_name(name: str) -> set[str]:
    """The words an entry could name a checked name by: the dotted name itself
    (wildcards dropped), its module (the first component, unless the pattern is
    ``*.x``, which names no module) and every distinctive component."""
    suffix_only = name.startswith("*.")
    parts = [p for p in name.removeprefix("*.").removesuffix(".*").split(".") if p]
    if not parts:
        return set()
    words = {c for c in parts if distinctive(c)}
    if len(parts) > 1 or not suffix_only:
        words.add(".".join(parts))
    if not suffix_only:
        words.add(parts[0])
    return words


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _names_in_params(params: BaseModel) -> set[str]:
    """Names a check's parameters forbid or require (see :func:`checked_names`)."""
    words: set[str] = set()
    if isinstance(params, python_ast.Params):
        for name in params.names:
            words |= _words_of_name(name)
        if params.where is not None:
            # Conditions name calls (same_function_as: [json.dump]), keywords
            # (exc_info) and values (CERT_NONE); only the dotted or distinctive ones
            # are taken, not plain words such as timeout or encoding.
            conditions = params.where.model_dump(exclude_defaults=True)
            for text in _strings(list(conditions.values())):
                if _DOTTED.fullmatch(text) and ("." in text or distinctive(text)):
                    words |= _words_of_name(text) if "." in text else {text}
    elif isinstance(params, regex_check.Params):
        literal = _PATTERN_SYNTAX.sub(" ", params.pattern)
        for token in _DOTTED.findall(literal):
            words |= {c for c in token.split(".") if distinctive(c)}
    return words


def checked_names(scenarios: Iterable[LoadedScenario]) -> dict[str, str]:
    """Every name the scenarios' checks forbid or require, lower-cased, mapped to
    the first ``scenario/constraint`` that checks it.

    From ``python-ast`` checks: each name of ``names`` and each dotted or
    distinctive name in ``where`` (the dotted name, its module, its distinctive
    components); from ``regex`` checks: the distinctive identifiers written
    literally in the pattern. Exec tests name nothing here.
    """
    out: dict[str, str] = {}
    for item in scenarios:
        sc = item.scenario
        for c in sc.constraints:
            for spec in c.checks:
                for word in _names_in_params(spec.params()):
                    out.setdefault(word.lower(), f"{sc.id}/{c.id}")
    return out


def checked_patterns(
    scenarios: Iterable[LoadedScenario],
) -> list[tuple[str, regex_check.Params]]:
    """The ``regex`` checks of the scenarios, each with its ``scenario/constraint/check``."""
    out = []
    for item in scenarios:
        sc = item.scenario
        for c in sc.constraints:
            for spec, check_id in zip(c.checks, c.check_ids(), strict=True):
                params = spec.params()
                if isinstance(params, regex_check.Params):
                    out.append((f"{sc.id}/{c.id}/{check_id}", params))
    return out


def _normalised(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def lint_pool(pool: Pool, scenarios: Iterable[LoadedScenario]) -> list[Finding]:
    """E020–E023 on a loaded pool, against the constraints of ``scenarios``."""
    scenarios = list(scenarios)
    path = str(pool.path)
    findings: list[Finding] = []
    names = checked_names(scenarios)
    name_re = (
        re.compile(
            r"(?<![\w.])("
            + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
            + r")(?![\w])",
            re.IGNORECASE,
        )
        if names
        else None
    )
    patterns = checked_patterns(scenarios)
    first_id: dict[str, int] = {}
    first_text: dict[str, int] = {}
    vocab: list[tuple[int, frozenset[str]]] = []
    for i, entry in enumerate(pool.entries):
        text_line = pool.line_of("entries", i, "text")

        def add(code: str, message: str, line: int = text_line, entry_id: str = entry.id) -> None:
            findings.append(Finding(path, line, code, f"entry {entry_id!r}: {message}"))

        for word in dict.fromkeys(imperative_words(entry.text)):
            add("E020", f"imperative wording {word!r}; state it as a past decision or a fact")
        if name_re is not None:
            for found in dict.fromkeys(m.group(1).lower() for m in name_re.finditer(entry.text)):
                add(
                    "E021",
                    f"names {found!r}, which the checks of {names[found]} look for; "
                    "a distractor stays off the constraints' ground",
                )
        for source, params in patterns:
            try:
                hit = params.compiled().search(entry.text, timeout=params.timeout_s)
            except TimeoutError:
                add("E021", f"the pattern of {source} timed out on the text")
                continue
            if hit is not None:
                add("E021", f"the pattern of {source} matches {hit.group(0)[:40]!r}")
        if entry.id in first_id:
            add(
                "E022",
                f"duplicate id (first at line {first_id[entry.id]})",
                pool.line_of("entries", i, "id"),
            )
        else:
            first_id[entry.id] = pool.line_of("entries", i, "id")
        norm = _normalised(entry.text)
        words = frozenset(norm.split())
        if norm in first_text:
            add("E022", f"repeats the text of the entry at line {first_text[norm]}")
        else:
            first_text[norm] = text_line
            for line, other in vocab:
                if len(words & other) / len(words | other) >= NEAR_DUPLICATE_WORDS:
                    add("E022", f"nearly repeats the entry at line {line}")
                    break
            vocab.append((text_line, words))
        count = len(entry.text.split())
        if not POOL_MIN_WORDS <= count <= POOL_MAX_WORDS:
            add(
                "E023",
                f"{count} words; an entry has {POOL_MIN_WORDS}–{POOL_MAX_WORDS}",
            )
    return findings


def _library_of(pool_path: Path, loaded: list[LoadedScenario]) -> list[LoadedScenario]:
    """The scenarios a pool belongs to: the whole library folder holding its memory
    folder, taken from those already loaded when all of them were, else read now
    (linting one category and the pool checks the pool against every constraint)."""
    root = pool_path.resolve().parent.parent
    wanted = sorted(p.resolve() for p in discover([root]))
    have = {item.path.resolve(): item for item in loaded}
    if all(p in have for p in wanted):
        return [have[p] for p in wanted]
    return load_all([root])[0]


def lint_pool_file(path: str | Path, scenarios: Iterable[LoadedScenario]) -> list[Finding]:
    """Load a pool file and lint it; a file that does not load gives its problems."""
    try:
        pool = load_pool(path)
    except PoolError as exc:
        return [Finding.from_problem(p) for p in exc.problems]
    return lint_pool(pool, scenarios)
