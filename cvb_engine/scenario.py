"""Scenario files: their pydantic models and a hardened YAML loader.

Loading never executes anything and never raises anything but
:class:`ScenarioError`, whose ``problems`` each carry the file, the line and
(where there is one) the field. The loader refuses, with a clear message:

* files that are not UTF-8, contain NUL or other control bytes, or exceed
  :data:`MAX_FILE_BYTES`;
* YAML tags other than the plain core ones (``!!python/object`` and kin are
  never constructed);
* anchors/aliases (scenario files never need them, and refusing them makes
  alias bombs impossible);
* duplicate mapping keys (YAML silently keeps the last one; an author would not).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cvb_engine.checks.base import get_kind, registry
from cvb_engine.kinds import SeedArm
from cvb_engine.run_ids import check_scenario_id

CVB_CATEGORIES: tuple[str, ...] = (
    "library-choice",
    "security",
    "encoding-io",
    "style-architecture",
    "error-handling",
    "concurrency",
    "logging-testing",
)
CATEGORIES: tuple[str, ...] = (*CVB_CATEGORIES, "ivr")
ARMS: tuple[str, ...] = tuple(a.value for a in SeedArm)
ID_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_FILE_BYTES = 512 * 1024
MAX_DEPTH = 32
# One fixed GUID in every shipped scenario file, so that the scenarios' presence
# in a model's training data can be detected later (see scenarios/README.md).
CANARY = "cvb-canary 6f1d2c84-3b7e-4e59-a0d2-9c5e8b71f3a6"

_INT_TAG = "tag:yaml.org,2002:int"
MAX_INT_CHARS = 100
_ALLOWED_TAGS = frozenset(
    {
        "tag:yaml.org,2002:str",
        _INT_TAG,
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:seq",
        "tag:yaml.org,2002:map",
    }
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, anchored to a line (1-based; 0 = whole file)."""

    path: str
    line: int
    message: str
    field: str | None = None
    code: str = "E001"

    def __str__(self) -> str:
        where = f" {self.field}:" if self.field else ""
        return f"{self.path}:{self.line}: {self.code}{where} {self.message}"


class ScenarioError(Exception):
    """A scenario file that cannot be loaded; ``problems`` says where and why."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


# --------------------------------------------------------------------------- models


class Derived:
    """What is made from a scenario once and kept with it (scoring's plan): not part of
    its value, so any two compare equal, and a copy of the scenario starts empty."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Derived)

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict[int, Any]) -> Derived:
        return Derived()


class CheckSpec(BaseModel):
    """One check as written in a scenario: its kind plus the kind's own parameters.

    The parameters are validated against the kind's ``Params`` model from the
    registry, so a new kind needs no change here.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str
    id: str | None = Field(default=None, description="optional stable id; default kind-N")
    _params: BaseModel | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _known_kind_and_params(self) -> CheckSpec:
        kind = get_kind(self.kind)
        if kind is None:
            known = ", ".join(sorted(registry()))
            raise ValueError(f"unknown check kind {self.kind!r} (known: {known})")
        self._params = kind.params.model_validate(self.raw_params())
        return self

    def raw_params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def params(self) -> BaseModel:
        """The parameters validated against the kind's model (once, with the spec)."""
        assert self._params is not None  # validated above
        return self._params


class Samples(BaseModel):
    """Labelled code that proves a constraint's checks: each violating sample must
    fail at least one check, each compliant sample must pass every check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    violating: list[str] = Field(default_factory=list)
    compliant: list[str] = Field(default_factory=list)


class Reads(BaseModel):
    """Which of the solution a constraint's checks read (README: Extraction).

    By default they read the solution sanitized: without the main guard, top-level
    demos, prints and self-checks the model did not mean as the solution.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    module_level: bool = Field(
        default=False,
        description="the constraint is about module-level code (the main guard, top-level "
        "calls, prints, asserts): its checks read the solution whole, not sanitized",
    )
    except_files: list[str] = Field(
        default_factory=list,
        description="files of a solution split over files that the constraint is not about "
        "(app/settings.py may read the environment): their code is left out of what the "
        "checks read, matched by path or by the path's end",
    )


class Constraint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    text: str = Field(min_length=10)
    checks: list[CheckSpec] = Field(min_length=1)
    samples: Samples = Field(default_factory=Samples)
    # What the checks cannot judge precisely (regex and AST see text and syntax,
    # not behaviour); shown in the report's limitations section.
    limitations: str | None = Field(
        default=None, description="what the checks of this constraint cannot judge precisely"
    )
    # The earlier decision this one replaced, as a dated project note ("2022-06: ..."):
    # what a memory that was never updated still says (the arms' ``stale=`` parameter).
    superseded: str | None = Field(
        default=None,
        min_length=10,
        description="the earlier decision this constraint replaced: a dated note, "
        "'YYYY-MM: the old practice as the team's practice at the time'",
    )
    reads: Reads = Field(default_factory=Reads)
    applies_when: Literal["shared-mutable-state"] | None = Field(
        default=None,
        description="a condition the solution must meet for the constraint to apply at "
        "all (shared-mutable-state: code whose threads share no mutable state honors a "
        "constraint about guarding it, without its checks)",
    )

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError(f"id {value!r} is not lowercase words joined by hyphens ([a-z0-9-])")
        return value

    def check_ids(self) -> list[str]:
        return [c.id or f"{c.kind}-{i}" for i, c in enumerate(self.checks)]


class Scenario(BaseModel):
    """A scenario file (README: Authoring scenarios)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    version: int = Field(ge=1, strict=True)
    category: Literal[
        "library-choice",
        "security",
        "encoding-io",
        "style-architecture",
        "error-handling",
        "concurrency",
        "logging-testing",
        "ivr",
    ]
    title: str = Field(min_length=3)
    task: str = Field(min_length=10)
    constraints: list[Constraint] = Field(min_length=1)
    stated_tests: str | None = None
    canary: str | None = None
    # The function or class the task asks for: extraction keeps the blocks that
    # define it (and what they use) and leaves out usage, tests and alternatives.
    entry_point: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the function or class the task asks for (an identifier)",
    )
    # IVR problems (category `ivr`): where the problem comes from, the clarified
    # intent the task leaves out (never shown to the model), and a solution that
    # follows only the ambiguous task — it passes the stated tests and fails at
    # least one hidden test, which `cvb audit` checks.
    source: str | None = Field(default=None, description="e.g. HumanEval/34")
    gold: str | None = Field(default=None, description="the full intent, hidden from the model")
    reference_solution: str | None = None
    # Scoring's plan (the checks prepared once; see cvb_engine.scoring.plan), kept
    # with the scenario it was made for.
    _scoring_plan: Derived = PrivateAttr(default_factory=Derived)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError(f"id {value!r} is not lowercase words joined by hyphens ([a-z0-9-])")
        return value

    def plan_slot(self) -> Derived:
        """Where :func:`cvb_engine.scoring.plan` keeps this scenario's scoring plan."""
        return self._scoring_plan

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (``update``: other field values) with no plan of its own yet."""
        copied = super().model_copy(update=update, deep=deep)
        copied._scoring_plan = Derived()
        return copied

    @model_validator(mode="after")
    def _unique_constraint_ids(self) -> Scenario:
        seen: set[str] = set()
        for c in self.constraints:
            if c.id in seen:
                raise ValueError(f"constraint id {c.id!r} appears twice")
            seen.add(c.id)
        return self


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario with where it came from: path, line map and file hash."""

    scenario: Scenario
    path: Path
    sha256: str
    lines: dict[tuple[str | int, ...], int] = field(repr=False, compare=False)

    def line_of(self, *loc: str | int) -> int:
        """The line of the deepest known node on ``loc`` (1 when nothing matches)."""
        return line_for(self.lines, loc)


# --------------------------------------------------------------------------- YAML


class _ReadableValues:
    """A scalar the safe constructor cannot read (``!!float ""``, ``!!bool maybe``,
    ``!!int 0x``) raises a Python error without a position; it becomes a YAML
    error marked at the node, so lint names its line."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except yaml.YAMLError:
            raise
        except Exception as exc:  # any failure to construct a value is the file's
            kind = node.tag.rsplit(":", 1)[-1]
            value = str(node.value)
            shown = value if len(value) <= 40 else value[:39] + "…"
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {shown!r} as {kind}: {type(exc).__name__}: {exc}",
                node.start_mark,
            ) from None


class _StrictLoader(_ReadableValues, yaml.SafeLoader):
    """SafeLoader that refuses aliases before they can be expanded."""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                None,
                None,
                "YAML aliases (*name) are not allowed in scenario files",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def _walk(
    node: Node, path: tuple[str | int, ...], depth: int, line: int | None = None
) -> Iterator[tuple[tuple[str | int, ...], int]]:
    """Yield (path, line) for every node; a mapping value is anchored at its key's line."""
    if depth > MAX_DEPTH:
        raise _NodeProblem(node, f"nesting deeper than {MAX_DEPTH} levels")
    if node.tag not in _ALLOWED_TAGS:
        raise _NodeProblem(node, f"YAML tag {node.tag!r} is not allowed (plain data only)")
    if node.tag == _INT_TAG and len(node.value) > MAX_INT_CHARS:
        # Hex, octal and base-60 integers skip Python's 4,300-digit limit on
        # reading, then fail on printing in whatever message shows the value.
        raise _NodeProblem(
            node, f"an integer of {len(node.value):,} characters (at most {MAX_INT_CHARS})"
        )
    yield path, line if line is not None else node.start_mark.line + 1
    if isinstance(node, MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                raise _NodeProblem(key, "mapping keys must be plain strings")
            if key.tag != "tag:yaml.org,2002:str":
                raise _NodeProblem(key, f"mapping key {key.value!r} is not a plain string", "E002")
            if key.value in seen:
                raise _NodeProblem(
                    key,
                    f"duplicate key {key.value!r} (first at line {seen[key.value]})",
                )
            seen[key.value] = key.start_mark.line + 1
            yield from _walk(value, (*path, key.value), depth + 1, key.start_mark.line + 1)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            yield from _walk(item, (*path, i), depth + 1)


class _NodeProblem(Exception):
    def __init__(self, node: Node, message: str, code: str = "E001") -> None:
        super().__init__(message)
        self.line = node.start_mark.line + 1
        self.code = code


def line_for(lines: dict[tuple[str | int, ...], int], loc: Iterable[str | int]) -> int:
    loc = tuple(loc)
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


def _decode(path: str, raw: bytes) -> str:
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(
            [
                Problem(
                    path,
                    0,
                    f"file is {len(raw)} bytes; scenario files are at most {MAX_FILE_BYTES}",
                )
            ]
        )
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise ScenarioError(
            [Problem(path, line, "binary content (NUL byte); not a YAML text file")]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ScenarioError(
            [
                Problem(
                    path,
                    line,
                    f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                )
            ]
        ) from None
    text = text.removeprefix("\ufeff")
    control = _CONTROL.search(text)
    if control:
        line = text.count("\n", 0, control.start()) + 1
        raise ScenarioError(
            [
                Problem(
                    path, line, f"control character U+{ord(control.group()):04X}; not a text file"
                )
            ]
        )
    return text


_FAST_LOADER: Any = None
if hasattr(yaml, "CSafeLoader"):

    class _FastLoader(_ReadableValues, yaml.CSafeLoader):
        """libyaml's parser with the safe constructor; aliases are screened out first."""

    _FAST_LOADER = _FastLoader


def _screen_events(text: str) -> None:
    """Refuse aliases and runaway nesting from the event stream, before any node
    is composed (libyaml's composer would expand neither check)."""
    depth = 0
    for event in yaml.parse(text, Loader=_FAST_LOADER):
        if isinstance(event, AliasEvent):
            raise yaml.MarkedYAMLError(
                None,
                None,
                "YAML aliases (*name) are not allowed in scenario files",
                event.start_mark,  # type: ignore[arg-type]
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.MarkedYAMLError(
                    None,
                    None,
                    f"nesting deeper than {MAX_DEPTH} levels",
                    event.start_mark,  # type: ignore[arg-type]
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _unmarked_problem(path: str, text: str, exc: yaml.YAMLError) -> Problem:
    """A YAML error without a mark; the reader's (a character YAML does not allow,
    such as U+0080 or U+FFFE) still knows its offset in the text."""
    if isinstance(exc, yaml.reader.ReaderError):
        # libyaml counts the offset in bytes; the reader stops at the first such
        # character, so its first occurrence is the one.
        index = text.find(chr(exc.character)) if isinstance(exc.character, int) else -1
        line = text.count("\n", 0, index) + 1 if index >= 0 else 1
        return Problem(path, line, f"YAML error: character #x{exc.character:04x} is not allowed")
    return Problem(path, 1, f"YAML error: {exc}")


def parse_yaml(path: str, text: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """Parse one YAML document safely; return the data and a map path → line.

    With libyaml present, the C parser does the work (about 20× faster, which
    the studio feels when it lints the library); the pure-Python loader is the
    fallback. Both refuse the same things.
    """
    loader: Any
    try:
        if _FAST_LOADER is not None:
            _screen_events(text)
            loader = _FAST_LOADER(text)
        else:
            loader = _StrictLoader(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        message = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise ScenarioError([Problem(path, line, f"YAML syntax: {message}")]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError([_unmarked_problem(path, text, exc)]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise ScenarioError([Problem(path, 1, "empty file: expected a scenario mapping")])
        lines: dict[tuple[str | int, ...], int] = {}
        for loc, line in _walk(node, (), 0):
            lines[loc] = line
        data = loader.construct_document(node)
    except _NodeProblem as exc:
        raise ScenarioError([Problem(path, exc.line, str(exc), code=exc.code)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        message = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        what = "value" if isinstance(exc, yaml.constructor.ConstructorError) else "syntax"
        raise ScenarioError([Problem(path, line, f"YAML {what}: {message}")]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError([_unmarked_problem(path, text, exc)]) from None
    except RecursionError:
        raise ScenarioError([Problem(path, 1, "YAML nested too deeply")]) from None
    finally:
        loader.dispose()
    return data, lines


def field_name(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _validation_problems(
    path: str, exc: ValidationError, lines: dict[tuple[str | int, ...], int], data: Any = None
) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        # pydantic adds the model/validator name for function validators; drop
        # non-data parts so the location matches the YAML path.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = str(err["msg"]).removeprefix("Value error, ")
        code = "E002"
        if message.startswith("unknown check kind"):
            code = "E006"
        elif "checks" in loc[:-1] or (len(loc) > 2 and loc[-2] == "checks"):
            # anything wrong with a check's own parameters (a regex that does
            # not compile, a rule without names, an unknown flag)
            code = "E007"
        elif err["type"] == "literal_error" and loc and loc[-1] == "category":
            code = "E005"
            message = f"unknown category {err['input']!r}; expected one of {', '.join(CATEGORIES)}"
        if (
            message.startswith("constraint id ")
            and "appears twice" in message
            and isinstance(data, dict)
        ):
            loc = _second_constraint(data, message) or loc
        problems.append(Problem(path, line_for(lines, loc), message, field_name(loc), code))
    return problems


def _second_constraint(data: dict[str, Any], message: str) -> tuple[str | int, ...] | None:
    seen: set[Any] = set()
    for i, c in enumerate(data.get("constraints") or []):
        cid = c.get("id") if isinstance(c, dict) else None
        if cid in seen and repr(cid) in message:
            return ("constraints", i, "id")
        seen.add(cid)
    return None


def load_text(text_or_bytes: str | bytes, path: str | Path = "<text>") -> LoadedScenario:
    """Load a scenario from text (or raw bytes) as if it were the file ``path``."""
    name = str(path)
    if isinstance(text_or_bytes, str):
        try:
            raw = text_or_bytes.encode("utf-8")
        except UnicodeEncodeError as exc:
            line = text_or_bytes.count("\n", 0, exc.start) + 1
            raise ScenarioError(
                [Problem(name, line, "text contains lone surrogates; not valid UTF-8")]
            ) from None
    else:
        raw = text_or_bytes
    text = _decode(name, raw)
    data, lines = parse_yaml(name, text)
    if not isinstance(data, dict):
        raise ScenarioError(
            [
                Problem(
                    name,
                    1,
                    f"expected a scenario mapping at the top level, found {type(data).__name__}",
                    code="E002",
                )
            ]
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_validation_problems(name, exc, lines, data)) from None
    return LoadedScenario(scenario, Path(path), content_sha256(raw, data, lines), lines)


def content_sha256(raw: bytes, data: Any, lines: dict[tuple[str | int, ...], int]) -> str:
    """The scenario's hash: sha256 of the file's bytes without its ``superseded`` notes.

    Records and run matrices keep this hash as provenance, and a run resumes only
    while its scenarios' hashes are unchanged. The superseded notes were added to
    the shipped files after runs were stored and change no prompt of a variant
    without ``stale=``, so their lines are left out: adding or editing one keeps
    every stored run resumable. A matrix with a ``stale=`` variant adds a hash of
    the notes instead (``cvb_engine.runner.Matrix``). The lines left out are each
    note's key line and the lines below it indented deeper (a block or multi-line
    scalar); a note written any other way (flow style) stays in the hash.
    """
    marked = [
        lines[("constraints", i, "superseded")]
        for i, c in enumerate(data.get("constraints") or [] if isinstance(data, dict) else [])
        if isinstance(c, dict) and "superseded" in c and ("constraints", i, "superseded") in lines
    ]
    if not marked:
        return hashlib.sha256(raw).hexdigest()
    rows = raw.split(b"\n")
    drop: set[int] = set()
    for line in marked:
        first = rows[line - 1]
        key_indent = len(first) - len(first.lstrip(b" "))
        if not first.lstrip(b" ").startswith(b"superseded:"):
            continue  # the key shares its line with something else: keep it all
        drop.add(line - 1)
        j = line
        while j < len(rows):
            row = rows[j]
            if row.strip() and len(row) - len(row.lstrip(b" ")) <= key_indent:
                break
            j += 1
        # trailing blank lines belong to what follows, not to the note
        while j > line and not rows[j - 1].strip():
            j -= 1
        drop.update(range(line, j))
    return hashlib.sha256(b"\n".join(r for k, r in enumerate(rows) if k not in drop)).hexdigest()


def _read_bytes(p: Path) -> bytes:
    try:
        with p.open("rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError([Problem(str(p), 0, f"cannot read: {exc.strerror or exc}")]) from None


def load_file(path: str | Path) -> LoadedScenario:
    """Load and validate one scenario file."""
    p = Path(path)
    return load_text(_read_bytes(p), p)


def read_yaml(path: str | Path) -> tuple[Any, dict[tuple[str | int, ...], int], bytes]:
    """Read any YAML data file of the library (not only scenarios) through the same
    hardened reader: the data, its path → line map and the raw bytes (for a hash).

    Raises:
        ScenarioError: the file cannot be read, is not UTF-8 text, or is not safe
            plain YAML; each problem names the file and the line.
    """
    p = Path(path)
    raw = _read_bytes(p)
    data, lines = parse_yaml(str(p), _decode(str(p), raw))
    return data, lines, raw


#: Folders of a scenario library that hold YAML files other than scenarios: the
#: project-memory pool (``memory/pool.yaml``, see :mod:`cvb_engine.memory_pool`).
NON_SCENARIO_DIRS: frozenset[str] = frozenset({"memory"})


def is_non_scenario_file(path: str | Path) -> bool:
    """Whether ``path`` lies in one of :data:`NON_SCENARIO_DIRS` (a pool, not a scenario)."""
    return Path(path).parent.name in NON_SCENARIO_DIRS


def constraint_executes_code(constraint: Constraint) -> bool:
    """Whether one of ``constraint``'s checks runs model code (needs the sandbox)."""
    return any(
        (kind := get_kind(spec.kind)) is not None and kind.executes_code
        for spec in constraint.checks
    )


def executes_code(scenario: Scenario) -> bool:
    """Whether scoring ``scenario`` runs model code (stated tests or an executing check),
    so that a command can refuse before it starts when no sandbox works. Here, not in
    :mod:`cvb_engine.scoring`: the runner asks before its first request, and scoring
    itself (with its imports) runs in the recorder process."""
    return bool(scenario.stated_tests) or any(
        constraint_executes_code(c) for c in scenario.constraints
    )


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Scenario files under ``paths`` (files as given, directories searched for *.yaml/*.yml).

    Files in :data:`NON_SCENARIO_DIRS` are not scenarios and are left out, whether
    found in a directory or named on their own.
    """
    found: dict[Path, Path] = {}  # resolved → as given: a file named twice is linted once
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for q in sorted(p.rglob("*")):
                if (
                    q.suffix in (".yaml", ".yml")
                    and NON_SCENARIO_DIRS.isdisjoint(q.relative_to(p).parts[:-1])
                    and q.is_file()
                ):
                    found.setdefault(q.resolve(), q)
        elif not is_non_scenario_file(p):
            found.setdefault(p.resolve(), p)
    return list(found.values())


def load_all(paths: Iterable[str | Path]) -> tuple[list[LoadedScenario], list[Problem]]:
    """Load every scenario under ``paths``; problems are collected, not raised."""
    loaded: list[LoadedScenario] = []
    problems: list[Problem] = []
    for p in discover(paths):
        try:
            loaded.append(load_file(p))
        except ScenarioError as exc:
            problems.extend(exc.problems)
    return loaded, problems


def scenario_file(root: str | Path, scenario_id: str) -> Path | None:
    """The library's file of ``scenario_id`` (``<root>/<category>/<id>.yaml``), or None.

    The one way to go from a scenario id (read from a store, a results file or a page) to a
    file: the id must pass the scenario-id rule (:class:`~cvb_engine.run_ids.RunIdError`
    otherwise) and is never a pattern; the file found must lie inside ``root`` once links
    are resolved. Pools (:data:`NON_SCENARIO_DIRS`) are not scenarios.
    """
    check_scenario_id(scenario_id, "scenario id")
    base = Path(root).resolve()
    if not base.is_dir():
        return None
    for category in sorted(base.iterdir()):
        if not category.is_dir() or category.name in NON_SCENARIO_DIRS:
            continue
        for suffix in (".yaml", ".yml"):
            candidate = (category / f"{scenario_id}{suffix}").resolve()
            if candidate.is_relative_to(base) and candidate.is_file():
                return candidate
    return None


#: A scenario file's top-level ``id:`` line, read without parsing the file.
_ID_LINE = re.compile(r"""^id:[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?[ \t]*(?:#.*)?$""", re.M)


def _may_hold(path: Path, wanted: set[str]) -> bool:
    """Whether ``path`` may be the file of one of ``wanted``: its ``id:`` line names one,
    or it has no ``id:`` line this pattern reads (then only parsing can tell)."""
    try:
        ids = set(_ID_LINE.findall(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return True  # loading it says what is wrong
    return not ids or not ids.isdisjoint(wanted)


def load_library(
    root: str | Path, only: Collection[str] | None = None
) -> dict[str, LoadedScenario]:
    """Load a scenario directory into a dict by id; raises on any problem.

    With ``only``, just the files that may hold those ids are parsed (a file whose
    top-level ``id:`` line names another scenario is skipped), so that a run of one
    scenario does not wait for the whole library, nor stop on a broken file it does
    not use; when that does not find them all, every file is loaded, as without
    ``only``. The result may then hold fewer scenarios than the library: pick from it.
    """
    paths = discover([root])
    if only:
        wanted = set(only)
        picked = [p for p in paths if _may_hold(p, wanted)]
        loaded, problems = load_all(picked)
        if not problems and wanted <= {item.scenario.id for item in loaded}:
            return {item.scenario.id: item for item in loaded}
    loaded, problems = load_all(paths)
    if problems:
        raise ScenarioError(problems)
    return {item.scenario.id: item for item in loaded}
