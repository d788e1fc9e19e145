"""What the Author page does, without the page: library listing, editor lint, samples, saving.

Nothing here draws anything; the page calls these functions and shows their
results. Every function is usable (and tested) without a running Streamlit
server; :mod:`studio.cache` wraps the ones a rerun repeats.

Saving is the part with teeth. A scenario is written only to
``<scenarios>/<category>/<id>.yaml`` and a draft only to
``<drafts>/<id>.yaml`` (by default ``data/drafts/`` beside the scenario
folder, outside the tree that ``cvb lint scenarios`` reads). Ids must match the
scenario id pattern, so a name can never carry ``/``, ``..`` or an absolute
path; the resolved target must still lie inside its root (a symlinked folder
pointing elsewhere is refused), and a symlink is never written through. An
existing file is replaced only when the caller says so, unless it is the
author's own file (the one they opened or last saved) and unchanged on disk
since. Writes go to a temporary file in the same folder and then
``os.link`` (no-clobber) or ``os.replace`` (overwrite), so a reader sees the
old file or the new one, never half of one.

No function here compiles or runs a user-supplied pattern: patterns are only
ever run by the engine's checks, which apply their own timeouts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cvb_engine.arms import build_messages
from cvb_engine.checks import registry
from cvb_engine.library import is_installed_library, user_home
from cvb_engine.lint import Finding, has_errors, lint_paths, lint_text
from cvb_engine.scenario import ARMS, CATEGORIES, LoadedScenario, Scenario, ScenarioError, load_text
from cvb_engine.scenario import ID_PATTERN as SCENARIO_ID_PATTERN
from cvb_engine.scenario import MAX_FILE_BYTES as MAX_SCENARIO_BYTES
from cvb_engine.scenario import discover as scenario_files
from cvb_engine.scoring import Scored, score_code

MAX_ID_LENGTH = 80
# Sample verdicts re-run every check on every sample; a pattern that times out
# on each of them must not hold the page for (samples x timeout) seconds.
SAMPLES_BUDGET_S = 1.5
DRAFTS_ENV = "CVB_DRAFTS"
# Only to guess a draft's file name from YAML that does not parse; anchored and
# linear, and it never sees a user pattern as a pattern.
_ID_LINE = re.compile(r"(?m)^id:[ \t]*[\"']?([a-z0-9-]{1,80})[\"']?[ \t]*(?:#.*)?$")


# --------------------------------------------------------------------------- paths


class PathRefused(ValueError):
    """A save target that is not a plain file inside its allowed root."""


def drafts_root(scenarios: Path) -> Path:
    """Where drafts go: ``$CVB_DRAFTS``, else ``data/drafts`` beside a checkout's or a
    team's scenario folder, else ``drafts/`` in the user folder: never inside the
    installed package."""
    configured = os.environ.get(DRAFTS_ENV)
    if configured:
        return Path(configured).resolve()
    if is_installed_library(scenarios):
        return (user_home() / "drafts").resolve()
    return (scenarios.resolve().parent / "data" / "drafts").resolve()


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a scenario id (and so a file name), or None when it can."""
    if not value:
        return "the id is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"the id is longer than {MAX_ID_LENGTH} characters"
    if not SCENARIO_ID_PATTERN.match(value):
        return (
            f"{value!r} is not a valid id: lowercase letters and digits in words joined by "
            "single hyphens, e.g. http-client-choice (no '/', '.', spaces or capitals)"
        )
    return None


def safe_path(root: Path, scenario_id: str, folder: str | None = None) -> Path:
    """``root/[folder/]scenario_id.yaml``, or :class:`PathRefused` when it would leave ``root``."""
    problem = id_problem(scenario_id)
    if problem:
        raise PathRefused(problem)
    base = root.resolve()
    parent = base
    if folder is not None:
        if folder not in CATEGORIES:
            raise PathRefused(f"unknown category folder {folder!r}")
        parent = base / folder
        if parent.is_symlink() or (parent.exists() and not parent.resolve().is_relative_to(base)):
            raise PathRefused(f"{parent} is a symbolic link; not writing through it")
        if parent.exists() and not parent.is_dir():
            raise PathRefused(f"{parent} exists and is not a folder")
    target = parent / f"{scenario_id}.yaml"
    if target.is_symlink():
        raise PathRefused(f"{target} is a symbolic link; not writing through it")
    if not target.resolve().is_relative_to(base):
        raise PathRefused(f"{target} is outside {base}")
    if target.exists() and not target.is_file():
        raise PathRefused(f"{target} exists and is not a file")
    return target


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def normalized(text: str) -> str:
    """The bytes a save writes: LF line ends and one final newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def write_atomic(target: Path, text: str, *, replace: bool) -> str:
    """Write ``text`` to ``target`` through a temporary file; return the written sha256.

    With ``replace=False`` an existing ``target`` is left alone and
    :class:`FileExistsError` is raised (no check-then-write race).
    """
    data = normalized(text).encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise
            except OSError:
                # File systems without hard links: fall back to a checked replace.
                if target.exists():
                    raise FileExistsError(str(target)) from None
                os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return hashlib.sha256(data).hexdigest()


def relative_label(path: Path, *roots: Path) -> str:
    """``path`` relative to the first root's parent that holds it (for display)."""
    for root in roots:
        base = root.resolve().parent
        with contextlib.suppress(ValueError):
            return str(path.resolve().relative_to(base))
    return str(path)


# --------------------------------------------------------------------------- library


Where = Literal["library", "draft"]
Stamp = tuple[str, int, int, int]


@dataclass(frozen=True)
class LibraryEntry:
    """One row of the library table."""

    key: str
    path: str
    where: Where
    id: str
    category: str
    title: str
    constraints: int | None
    errors: int
    warnings: int

    @property
    def status(self) -> str:
        # Plain text symbols: a table cell cannot hold icons, and emoji fonts are not a given.
        if self.errors:
            return f"✗ {self.errors} error{'s' * (self.errors != 1)}"
        if self.warnings:
            return f"⚠ {self.warnings} warning{'s' * (self.warnings != 1)}"
        return "✓ clean"


def stamp(path: Path) -> Stamp:
    """What identifies a file version for caching: path, size, mtime and inode."""
    st_ = path.stat()
    return (str(path), st_.st_size, st_.st_mtime_ns, st_.st_ino)


def library_files(root: Path) -> list[Path]:
    """The files ``cvb lint`` would read under ``root``, minus symlinks leading outside it."""
    base = root.resolve()
    if not base.is_dir():
        return []
    return [p for p in scenario_files([base]) if p.resolve().is_relative_to(base)]


def draft_files(drafts: Path) -> list[Path]:
    if not drafts.is_dir():
        return []
    base = drafts.resolve()
    return sorted(
        p
        for p in drafts.iterdir()
        if p.suffix in (".yaml", ".yml") and p.is_file() and p.resolve().is_relative_to(base)
    )


def library_stamps(root: Path) -> tuple[Stamp, ...]:
    """Stamps of the library files only (the set the editor is linted against)."""
    stamps: list[Stamp] = []
    for p in library_files(root):
        with contextlib.suppress(OSError):
            stamps.append(stamp(p))
    return tuple(stamps)


def read_text(path: Path) -> str:
    """A scenario file as text; undecodable bytes are shown, not fatal (lint names them)."""
    with path.open("rb") as fh:
        raw = fh.read(MAX_SCENARIO_BYTES + 1)
    return raw.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class FileReport:
    """One file on its own: the parsed scenario (if it loads) and its single-file lint."""

    path: str
    item: LoadedScenario | None
    findings: tuple[Finding, ...]


def file_report(path: Path) -> FileReport:
    """Lint one file on its own (the cross-file rules need the whole set; see ``lint_editor``)."""
    try:
        text = path.read_bytes()[: MAX_SCENARIO_BYTES + 1].decode("utf-8")
    except (OSError, UnicodeDecodeError):
        # Unreadable or not UTF-8: let the engine say why, in its own words.
        findings = [f for f in lint_paths([path], shipped=False) if f.code != "E012"]
        return FileReport(str(path), None, tuple(findings))
    item, findings = lint_text(text, path)
    # Alone, every file "holds 1 scenario" of its category; the count is a set rule,
    # which the library view shows per category and the editor lints against the set.
    return FileReport(str(path), item, tuple(f for f in findings if f.code != "E012"))


def library_entry(report: FileReport, root: Path, where: Where) -> LibraryEntry:
    path = Path(report.path)
    errors = sum(f.severity == "error" for f in report.findings)
    warnings = len(report.findings) - errors
    key = f"{where}:{path.resolve().relative_to(root.resolve())}"
    if report.item is None:
        folder = path.parent.name if where == "library" else "—"
        return LibraryEntry(
            key, str(path), where, path.stem, folder, "(does not load)", None, errors, warnings
        )
    sc = report.item.scenario
    return LibraryEntry(
        key,
        str(path),
        where,
        sc.id,
        str(sc.category),
        sc.title,
        len(sc.constraints),
        errors,
        warnings,
    )


# --------------------------------------------------------------------------- editor lint


@dataclass(frozen=True)
class EditorLint:
    """Lint of the editor text as if it were saved where its id and category say."""

    item: LoadedScenario | None
    findings: tuple[Finding, ...]
    target: Path | None
    target_problem: str | None = None

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return len(self.findings) - self.errors


def lint_editor(
    text: str, root: Path, library: Iterable[LoadedScenario], fallback: Path
) -> EditorLint:
    """Lint ``text`` against ``library`` (duplicate ids, category counts as warnings).

    The file name is derived from the text's own id and category, because that
    is where a save puts it; until the text parses, ``fallback`` stands in.
    """
    library = list(library)
    item, findings = lint_text(text, fallback, library=library)
    if item is None:
        return EditorLint(None, tuple(findings), None)
    sc = item.scenario
    try:
        target = safe_path(root, sc.id, str(sc.category))
    except PathRefused as exc:
        return EditorLint(item, tuple(findings), None, str(exc))
    if target != fallback:
        item, findings = lint_text(text, target, library=library)
    return EditorLint(item, tuple(findings), target)


def guess_id(text: str) -> str | None:
    """The ``id:`` of YAML that may not parse (for naming a draft)."""
    match = _ID_LINE.search(text[:MAX_SCENARIO_BYTES])
    return match.group(1) if match and id_problem(match.group(1)) is None else None


# --------------------------------------------------------------------------- saving


SaveStatus = Literal["saved", "confirm", "refused", "failed"]


@dataclass(frozen=True)
class SavePlan:
    """Where a save would go and whether it may go ahead."""

    target: Path | None
    exists: bool = False
    own: bool = False
    blocked: str | None = None

    @property
    def needs_confirmation(self) -> bool:
        return self.exists and not self.own


@dataclass(frozen=True)
class SaveOutcome:
    status: SaveStatus
    message: str
    path: Path | None = None
    sha256: str | None = None


def _plan(target: Path | None, owned: Mapping[str, str], blocked: str | None = None) -> SavePlan:
    if target is None or blocked:
        return SavePlan(target, blocked=blocked or "no target")
    exists = target.exists()
    # "Own" = the file this editor opened or last wrote, untouched on disk since.
    own = exists and owned.get(str(target)) == file_sha256(target)
    return SavePlan(target, exists, own)


def plan_library_save(lint: EditorLint, owned: Mapping[str, str]) -> SavePlan:
    if lint.item is None:
        return SavePlan(None, blocked="the YAML does not load yet; fix the errors first")
    if lint.target is None:
        return SavePlan(None, blocked=lint.target_problem or "no valid target")
    if has_errors(lint.findings):
        n = lint.errors
        return SavePlan(
            lint.target, blocked=f"lint reports {n} error{'s' * (n != 1)}; fix them or save a draft"
        )
    return _plan(lint.target, owned)


def plan_draft_save(
    text: str, drafts: Path, fallback_id: str, owned: Mapping[str, str]
) -> SavePlan:
    name = guess_id(text) or fallback_id
    try:
        target = safe_path(drafts, name)
    except PathRefused as exc:
        return SavePlan(None, blocked=str(exc))
    return _plan(target, owned)


def execute(plan: SavePlan, text: str, *, overwrite: bool, what: str) -> SaveOutcome:
    """Carry out a save plan (re-checking what the plan said just before writing)."""
    if plan.blocked or plan.target is None:
        return SaveOutcome("refused", f"Not saved: {plan.blocked}.")
    target = plan.target
    if plan.needs_confirmation and not overwrite:
        return SaveOutcome(
            "confirm",
            f"Not saved: {target.name} already exists. "
            "Tick “Overwrite the existing file” to replace it.",
            target,
        )
    try:
        sha = write_atomic(target, text, replace=plan.exists)
    except FileExistsError:
        return SaveOutcome(
            "confirm",
            f"Not saved: {target.name} appeared on disk meanwhile. "
            "Tick “Overwrite the existing file” to replace it.",
            target,
        )
    except OSError as exc:
        return SaveOutcome(
            "failed", f"Could not write {target}: {exc.strerror or exc}. Your text is kept.", target
        )
    return SaveOutcome("saved", f"Saved {what} to {target}.", target, sha)


def discard_draft(path: Path, drafts: Path, owned: Mapping[str, str]) -> bool:
    """Delete a draft once its scenario is in the library, if it is still what we wrote."""
    try:
        inside = path.resolve().parent == drafts.resolve() and not path.is_symlink()
    except OSError:
        return False
    if not inside or owned.get(str(path)) != file_sha256(path):
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def save_to_library(
    text: str,
    root: Path,
    library: Iterable[LoadedScenario],
    owned: Mapping[str, str],
    *,
    overwrite: bool = False,
    fallback: Path | None = None,
) -> SaveOutcome:
    """Lint ``text`` and write it to ``root/<category>/<id>.yaml`` if lint has no errors."""
    lint = lint_editor(text, root, library, fallback or root / "untitled.yaml")
    return execute(plan_library_save(lint, owned), text, overwrite=overwrite, what="the scenario")


def save_draft(
    text: str, drafts: Path, fallback_id: str, owned: Mapping[str, str], *, overwrite: bool = False
) -> SaveOutcome:
    """Write ``text`` as it is, lint or not, to ``drafts/<id>.yaml``."""
    plan = plan_draft_save(text, drafts, fallback_id, owned)
    return execute(plan, text, overwrite=overwrite, what="the draft")


# --------------------------------------------------------------------------- samples


SampleLabel = Literal["violating", "compliant"]


@dataclass(frozen=True)
class SampleVerdict:
    """A labelled sample of one constraint and what that constraint's checks say about it."""

    constraint_id: str
    label: SampleLabel
    index: int
    code: str
    honored: bool | None  # None: not run (time budget spent)
    failing: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.constraint_id}:{self.label}:{self.index}"

    @property
    def expected_honored(self) -> bool:
        return self.label == "compliant"

    @property
    def agrees(self) -> bool | None:
        return None if self.honored is None else self.honored == self.expected_honored

    @property
    def expected_text(self) -> str:
        return "passes every check" if self.expected_honored else "fails a check"

    @property
    def got_text(self) -> str:
        if self.honored is None:
            return "not run (time budget)"
        if self.honored:
            return "passes every check"
        return "fails " + ", ".join(self.failing)


def sample_verdicts(scenario: Scenario, budget_s: float = SAMPLES_BUDGET_S) -> list[SampleVerdict]:
    """Every sample against its own constraint's checks (the rule lint's E008 enforces)."""
    deadline = time.monotonic() + budget_s
    out: list[SampleVerdict] = []
    for constraint in scenario.constraints:
        # Only this constraint's checks decide its samples; stated tests play no part.
        alone = scenario.model_copy(update={"constraints": [constraint], "stated_tests": None})
        labelled: list[tuple[SampleLabel, str]] = [
            *(("violating", code) for code in constraint.samples.violating),
            *(("compliant", code) for code in constraint.samples.compliant),
        ]
        counters = {"violating": 0, "compliant": 0}
        for label, code in labelled:
            counters[label] += 1
            i = counters[label]
            if time.monotonic() > deadline:
                out.append(SampleVerdict(constraint.id, label, i, code, None))
                continue
            verdict = score_code(alone, code).constraints[0]
            failing = tuple(
                f"{constraint.id}/{c.check_id}" for c in verdict.checks if not c.result.passed
            )
            out.append(SampleVerdict(constraint.id, label, i, code, verdict.honored, failing))
    return out


# --------------------------------------------------------------------------- check kinds


@dataclass(frozen=True)
class FieldDoc:
    name: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class KindDoc:
    """A check kind's reference: its parameters, and the fields of nested parameter models
    keyed by the parameter that holds them (e.g. ``where`` of ``python-ast``)."""

    name: str
    description: str
    executes_code: bool
    fields: tuple[FieldDoc, ...]
    nested: tuple[tuple[str, tuple[FieldDoc, ...]], ...] = field(default=())


_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "null",
}


def _yaml_value(value: Any) -> str:
    """A default as it would be written in YAML."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return repr(value)


def _type_of(prop: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " | ".join(_type_of(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    kind = prop.get("type")
    if kind == "array":
        return f"list[{_type_of(prop.get('items', {}))}]"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"map: name → {_type_of(extra)}" if isinstance(extra, dict) else "mapping"
    return _JSON_TYPES.get(str(kind), str(kind or "any"))


def _fields(schema: Mapping[str, Any]) -> tuple[FieldDoc, ...]:
    required = set(schema.get("required", ()))
    docs = []
    for name, prop in schema.get("properties", {}).items():
        if name in required:
            default = "required"
        elif "default" in prop:
            default = _yaml_value(prop["default"])
        else:
            default = "empty"
        # "| null" only says "optional", which the default column already shows.
        type_ = _type_of(prop).replace(" | null", "")
        docs.append(FieldDoc(name, type_, default, str(prop.get("description", ""))))
    return tuple(docs)


def kind_reference() -> list[KindDoc]:
    """Every registered check kind with its parameters, read from its pydantic ``Params``."""
    docs = []
    for name, kind in sorted(registry().items()):
        schema = kind.params.model_json_schema()
        fields = _fields(schema)
        nested = []
        for def_name, sub in schema.get("$defs", {}).items():
            holders = [f.name for f in fields if def_name in f.type.split(" | ")]
            nested.append((holders[0] if holders else def_name, _fields(sub)))
        fields = tuple(
            FieldDoc(f.name, "mapping (fields below)", f.default, f.description)
            if f.type in schema.get("$defs", {})
            else f
            for f in fields
        )
        docs.append(KindDoc(name, kind.description, kind.executes_code, fields, tuple(nested)))
    return docs


def _short(value: Any) -> str:
    """A check parameter in one short line, YAML-like."""
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return _yaml_value(value)


def check_summary(scenario: Scenario) -> dict[str, list[tuple[str, str]]]:
    """Per constraint: (check label, its parameters in one line) for the playground's cards."""
    out: dict[str, list[tuple[str, str]]] = {}
    for c in scenario.constraints:
        rows = []
        for check_id, spec in zip(c.check_ids(), c.checks, strict=True):
            params = " · ".join(f"{k}: {_short(v)}" for k, v in spec.raw_params().items())
            rows.append((f"{c.id}/{check_id}", f"{spec.kind} — {params}"))
        out[c.id] = rows
    return out


def prompts(scenario: Scenario) -> dict[str, list[dict[str, str]]]:
    """The messages of every arm, exactly as the runner sends them."""
    return {
        arm: [{"role": m["role"], "content": m["content"]} for m in build_messages(scenario, arm)]
        for arm in ARMS
    }


def library_view(
    root: Path, drafts: Path, report_of: Callable[[Stamp], FileReport] | None = None
) -> tuple[list[LibraryEntry], list[LoadedScenario]]:
    """Table rows for the library and its drafts, and the library's loaded scenarios.

    ``report_of`` reads one file's report from its stamp (the page passes a cached one,
    :func:`studio.cache.file_report`); by default each file is read now.
    """
    read = report_of or (lambda file_stamp: file_report(Path(file_stamp[0])))
    entries: list[LibraryEntry] = []
    items: list[LoadedScenario] = []
    places: list[tuple[Where, Path, list[Path]]] = [
        ("library", root, library_files(root)),
        ("draft", drafts, draft_files(drafts)),
    ]
    for where, base, files in places:
        for path in files:
            try:
                report = read(stamp(path))
            except OSError:
                continue
            entries.append(library_entry(report, base, where))
            if where == "library" and report.item is not None:
                items.append(report.item)
    return entries, items


def score_text(text: str, path: str, code: str) -> Scored | None:
    """``code`` scored against the scenario in ``text``; None while the text does not load."""
    try:
        item = load_text(text, path)
    except ScenarioError:
        return None
    return score_code(item.scenario, code)


def sample_verdicts_of_text(text: str, path: str) -> list[SampleVerdict]:
    """The verdicts on the samples of the scenario in ``text``; none while it does not load."""
    try:
        item = load_text(text, path)
    except ScenarioError:
        return []
    return sample_verdicts(item.scenario)
