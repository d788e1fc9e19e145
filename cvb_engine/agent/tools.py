"""The agent's five tools over its workspace (README: Agent arm).

``list_files(path)``, ``read_file(path)``, ``search_files(query)``,
``write_file(path, content)``, ``run_tests()``: the names and JSON argument
names are fixed. Every call is untrusted data: whatever the model sends, a call
either acts inside the workspace or becomes a *refusal*, a message the model
gets back and the trace keeps (:class:`~cvb_engine.agent.trace.ToolCall`
``refused``/``reason``). Nothing here raises for a call's content.

Every path goes through one function, :func:`resolve`: relative, ``/``
separators, no ``..`` component, no NUL, at most :data:`MAX_PATH_CHARS`
characters and :data:`MAX_DEPTH` components, and no component of it may be a
symbolic link (checked with ``lstat`` one component at a time, and files are
opened with ``O_NOFOLLOW``), so no call reads or writes outside the workspace.

Bounds (each says so when it cuts):

* ``read_file``: the first :data:`MAX_READ_CHARS` characters, then a line
  ``[cut: ...]`` naming the file's full length;
* ``search_files``: case-insensitive plain text, at most :data:`MAX_MATCHES`
  lines of ``path:line: text`` (each line cut to :data:`MAX_LINE_CHARS` around
  the match), files over :data:`MAX_SEARCH_FILE_BYTES` skipped;
* ``list_files``: at most :data:`MAX_ENTRIES` entries;
* ``write_file``: at most :data:`MAX_WRITE_CHARS` characters per file,
  :data:`MAX_FILES` files created and :data:`MAX_WORKSPACE_BYTES` in all; a
  write over a cap is refused whole (nothing is written);
* ``run_tests``: the summary the sandbox run gives, at most
  :data:`MAX_RESULT_CHARS` characters (model code runs only there).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cvb_engine.agent.trace import ArgValue, ConstraintPlace, ToolCall

__all__ = [
    "MAX_READ_CHARS",
    "MAX_WRITE_CHARS",
    "TOOLS",
    "TOOL_NAMES",
    "PathRefused",
    "ToolBox",
    "check_path",
    "resolve",
]

MAX_PATH_CHARS = 256
MAX_DEPTH = 12
#: read_file returns at most this many characters of a file.
MAX_READ_CHARS = 20_000
#: write_file takes at most this many characters (the reply's arguments are cut at
#: 20,000 characters by cvb_engine.replies, JSON escapes included).
MAX_WRITE_CHARS = 16_000
MAX_FILES = 64
MAX_WORKSPACE_BYTES = 2_000_000
MAX_ENTRIES = 200
MAX_QUERY_CHARS = 200
MAX_MATCHES = 40
MAX_LINE_CHARS = 240
MAX_SEARCH_FILE_BYTES = 256_000
#: Any tool result the model gets is cut here.
MAX_RESULT_CHARS = 24_000
#: What the trace keeps of a call: raw arguments, each parsed value, the result.
TRACE_ARGUMENT_CHARS = 4_000
TRACE_VALUE_CHARS = 2_000
TRACE_RESULT_CHARS = 4_000

TOOL_NAMES = ("list_files", "read_file", "search_files", "write_file", "run_tests")


def _tool(name: str, description: str, properties: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": text} for key, text in properties.items()
                },
                "required": list(properties),
            },
        },
    }


#: The tools as the OpenAI tools API takes them.
TOOLS: list[dict[str, Any]] = [
    _tool(
        "list_files",
        "List the entries of a folder of the repository (folders end with /).",
        {"path": 'the folder, relative to the repository root ("." for the root)'},
    ),
    _tool(
        "read_file",
        f"Read a text file of the repository (the first {MAX_READ_CHARS} characters).",
        {"path": "the file, relative to the repository root"},
    ),
    _tool(
        "search_files",
        "Find the lines of the repository's files that contain a text (case-insensitive); "
        "each result is path:line: text.",
        {"query": "the text to look for"},
    ),
    _tool(
        "write_file",
        "Create or replace a file of the repository with the given content.",
        {
            "path": "the file, relative to the repository root",
            "content": "the file's complete new content",
        },
    ),
    _tool("run_tests", "Run the repository's tests and return a summary.", {}),
]

_USAGE = {
    "list_files": '{"path": "."}',
    "read_file": '{"path": "README.md"}',
    "search_files": '{"query": "text"}',
    "write_file": '{"path": "pkg/module.py", "content": "..."}',
    "run_tests": "{}",
}


_FIELDS: dict[str, tuple[str, ...]] = {
    "list_files": ("path",),
    "read_file": ("path",),
    "search_files": ("query",),
    "write_file": ("path", "content"),
    "run_tests": (),
}


class PathRefused(ValueError):
    """A path a tool will not touch; the message is what the model is told."""


def check_path(raw: object, *, root_ok: bool = False) -> str:
    """The workspace-relative form of ``raw`` (``a/b.py``; ``""`` is the root), as a pure
    check of its text (:func:`resolve` also checks the file system).

    Raises:
        PathRefused: not a string, empty (unless ``root_ok``), absolute, with ``..``,
            a NUL or a backslash, too long or too deep.
    """
    if not isinstance(raw, str):
        raise PathRefused("the path must be a string")
    if "\0" in raw:
        raise PathRefused("the path contains a NUL character")
    if len(raw) > MAX_PATH_CHARS:
        raise PathRefused(f"the path is longer than {MAX_PATH_CHARS} characters")
    text = raw.strip()
    if text.startswith(("/", "\\", "~")) or (len(text) > 1 and text[1] == ":"):
        raise PathRefused(
            f"{raw!r} is an absolute path; paths are relative to the repository root "
            '("." is the root)'
        )
    if "\\" in text:
        raise PathRefused(f"{raw!r}: use / to separate folders")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"{raw!r} leaves the repository ('..' is not allowed)")
    if len(parts) > MAX_DEPTH:
        raise PathRefused(f"{raw!r} is deeper than {MAX_DEPTH} folders")
    if not parts and not root_ok:
        raise PathRefused("the path names no file")
    return "/".join(parts)


def resolve(root: Path, raw: object, *, root_ok: bool = False) -> tuple[str, Path]:
    """The one path check every tool uses: ``raw`` as (relative form, absolute path) under
    ``root``, when no existing component of it is a symbolic link or leaves ``root``.

    Raises:
        PathRefused: what :func:`check_path` refuses, a symbolic link on the way, or a
            component that is not a folder where one is needed.
    """
    rel = check_path(raw, root_ok=root_ok)
    here = root
    parts = rel.split("/") if rel else []
    for i, part in enumerate(parts):
        here = here / part
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            break  # the rest does not exist yet (a write creates it)
        except OSError as exc:
            raise PathRefused(f"{rel!r}: {exc.strerror or 'cannot be used'}") from None
        if stat.S_ISLNK(info.st_mode):
            raise PathRefused(f"{rel!r}: a symbolic link is on the way; links are not followed")
        if i < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
            raise PathRefused(f"{'/'.join(parts[: i + 1])!r} is a file, not a folder")
    full = root / rel if rel else root
    # Belt and braces: whatever the text checks missed, the result stays under root.
    if os.path.commonpath([os.path.abspath(full), os.path.abspath(root)]) != os.path.abspath(root):
        raise PathRefused(f"{rel!r} leaves the repository")
    return rel, full


def _bounded(text: str, limit: int) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)


def _value(value: object) -> ArgValue:
    if value is None or isinstance(value, bool | int | float):
        if isinstance(value, float) and value != value:  # NaN is no JSON value to keep
            return None
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return None
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:20_000]
    return text[:TRACE_VALUE_CHARS]


@dataclass
class _Outcome:
    result: str
    refused: bool = False
    path: str | None = None
    shown: tuple[str, ...] = ()


#: run_tests: given the workspace root, the summary the model gets.
TestRunner = Callable[[Path], Awaitable[str]]


@dataclass
class ToolBox:
    """The tools of one episode over the workspace at ``root``.

    ``places`` says where each constraint's text lives (read flags); a memory
    file the agent rewrites no longer holds what it held, so reading it later
    does not count as reading the rules.
    """

    root: Path
    places: tuple[ConstraintPlace, ...] = ()
    run_tests: TestRunner | None = None
    written: dict[str, int] = field(default_factory=dict)
    _changed: set[str] = field(default_factory=set)
    _bytes: int = 0

    def __post_init__(self) -> None:
        self._bytes = sum(
            p.stat().st_size for p in self.root.rglob("*") if p.is_file() and not p.is_symlink()
        )

    async def call(
        self, round_: int, call_id: str | None, name: str, arguments: str
    ) -> tuple[ToolCall, str]:
        """Answer one tool call: its trace entry and the text the model gets. Never raises
        for what the call holds."""
        started = time.monotonic()
        raw, raw_cut = _bounded(arguments, TRACE_ARGUMENT_CHARS)
        parsed: dict[str, ArgValue] | None = None
        try:
            args = self._arguments(name, arguments)
            parsed = {str(k)[:64]: _value(v) for k, v in list(args.items())[:16]}
            outcome = await self._dispatch(name, args)
        except PathRefused as exc:
            outcome = _Outcome(f"refused: {exc}", refused=True)
        except Exception as exc:  # an OS error on a workspace file is the call's answer
            outcome = _Outcome(f"refused: {name} failed: {type(exc).__name__}", refused=True)
        text, cut = _bounded(outcome.result, MAX_RESULT_CHARS)
        kept, kept_cut = _bounded(text, TRACE_RESULT_CHARS)
        entry = ToolCall(
            round=round_,
            call_id=call_id,
            name=name[:128],
            arguments=raw,
            arguments_cut=raw_cut,
            parsed=parsed,
            result=kept,
            result_cut=cut or kept_cut,
            refused=outcome.refused,
            reason=outcome.result.removeprefix("refused: ") if outcome.refused else None,
            path=outcome.path,
            shown=outcome.shown,
            latency_s=round(time.monotonic() - started, 4),
        )
        return entry, text

    def _arguments(self, name: str, arguments: str) -> Mapping[str, Any]:
        if name not in TOOL_NAMES:
            raise PathRefused(f"unknown tool {name[:64]!r}; the tools are {', '.join(TOOL_NAMES)}")
        text = arguments.strip()
        if not text and name == "run_tests":
            return {}
        from cvb_engine.replies import MAX_TOOL_ARGUMENT_CHARS

        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            if len(arguments) >= MAX_TOOL_ARGUMENT_CHARS:
                raise PathRefused(
                    f"the arguments are longer than {MAX_TOOL_ARGUMENT_CHARS} characters (cut); "
                    f"{name} takes at most {MAX_WRITE_CHARS} characters of content"
                ) from None
            raise PathRefused(
                f"the arguments are not JSON; {name} takes an object like {_USAGE[name]}"
            ) from None
        if not isinstance(value, dict):
            raise PathRefused(f"the arguments must be a JSON object like {_USAGE[name]}")
        for key in _FIELDS[name]:
            if key not in value:
                raise PathRefused(f"{name} needs the field {key!r}: {_USAGE[name]}")
            if not isinstance(value[key], str):
                raise PathRefused(f"{name}: the field {key!r} must be a string")
        return value

    async def _dispatch(self, name: str, args: Mapping[str, Any]) -> _Outcome:
        if name == "list_files":
            return self._list(args["path"])
        if name == "read_file":
            return self._read(args["path"])
        if name == "search_files":
            return self._search(args["query"])
        if name == "write_file":
            return self._write(args["path"], args["content"])
        return await self._tests()

    # ---- the tools

    def _list(self, raw: str) -> _Outcome:
        rel, full = resolve(self.root, raw, root_ok=True)
        try:
            info = os.lstat(full)
        except FileNotFoundError:
            raise PathRefused(f"{rel or '.'!r} does not exist") from None
        if not stat.S_ISDIR(info.st_mode):
            raise PathRefused(f"{rel!r} is a file, not a folder (read it with read_file)")
        entries = []
        with os.scandir(full) as it:
            for entry in it:
                is_dir = entry.is_dir(follow_symlinks=False)
                entries.append(entry.name + ("/" if is_dir else ""))
        entries.sort()
        shown = entries[:MAX_ENTRIES]
        more = len(entries) - len(shown)
        text = "\n".join(shown) if shown else "(empty folder)"
        if more:
            text += f"\n[{more} more entries not shown]"
        return _Outcome(text, path=rel or ".")

    def _read(self, raw: str) -> _Outcome:
        rel, full = resolve(self.root, raw)
        if full.is_dir() and not full.is_symlink():
            raise PathRefused(f"{rel!r} is a folder (list it with list_files)")
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise PathRefused(f"{rel!r} does not exist") from None
        except OSError as exc:
            raise PathRefused(f"{rel!r} cannot be read: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise PathRefused(f"{rel!r} is a folder (list it with list_files)")
            if not stat.S_ISREG(info.st_mode):
                raise PathRefused(f"{rel!r} is not a regular file")
            data = handle.read(MAX_READ_CHARS * 4 + 4)
        text = data.decode("utf-8", errors="replace")
        whole = len(data) == info.st_size and len(text) <= MAX_READ_CHARS
        if whole:
            shown_lines = text.count("\n") + 1
            body = text
        else:
            body = text[:MAX_READ_CHARS]
            # only lines shown whole count as read
            shown_lines = body.count("\n")
            body += (
                f"\n[cut: {rel} has {info.st_size} bytes; the first {MAX_READ_CHARS} "
                "characters are shown]"
            )
        return _Outcome(body, path=rel, shown=self._shown(rel, lambda p: p.end_line <= shown_lines))

    def _search(self, query: str) -> _Outcome:
        needle = query.strip()
        if not needle:
            raise PathRefused("the query is empty")
        if len(needle) > MAX_QUERY_CHARS:
            raise PathRefused(f"the query is longer than {MAX_QUERY_CHARS} characters")
        low = needle.lower()
        hits: list[str] = []
        seen: set[tuple[str, int]] = set()
        total = 0
        skipped = 0
        for rel, full in self._files():
            try:
                if os.lstat(full).st_size > MAX_SEARCH_FILE_BYTES:
                    skipped += 1
                    continue
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as handle:
                    text = handle.read(MAX_SEARCH_FILE_BYTES + 1).decode("utf-8", "replace")
            except OSError:
                continue
            for n, line in enumerate(text.splitlines(), start=1):
                at = line.lower().find(low)
                if at < 0:
                    continue
                total += 1
                if len(hits) >= MAX_MATCHES:
                    continue
                hits.append(f"{rel}:{n}: {_window(line, at, len(needle))}")
                seen.add((rel, n))
        text = "\n".join(hits) if hits else f"no line contains {needle!r}"
        if total > len(hits):
            text += f"\n[{total - len(hits)} more matching lines not shown]"
        if skipped:
            text += f"\n[{skipped} files over {MAX_SEARCH_FILE_BYTES} bytes not searched]"
        shown = tuple(
            dict.fromkeys(
                p.constraint_id
                for p in self.places
                if p.path not in self._changed
                and any((p.path, n) in seen for n in range(p.line, p.end_line + 1))
            )
        )
        return _Outcome(text, shown=shown)

    def _write(self, raw: str, content: str) -> _Outcome:
        rel, full = resolve(self.root, raw)
        if len(content) > MAX_WRITE_CHARS:
            raise PathRefused(
                f"the content has {len(content)} characters; a file may have at most "
                f"{MAX_WRITE_CHARS} (nothing was written)"
            )
        data = content.encode("utf-8", errors="replace")
        try:
            old = os.lstat(full)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise PathRefused(f"{rel!r} is not a regular file")
        grow = len(data) - (old.st_size if old else 0)
        if self._bytes + grow > MAX_WORKSPACE_BYTES:
            raise PathRefused(
                f"the repository would exceed {MAX_WORKSPACE_BYTES} bytes (nothing was written)"
            )
        if old is None and len(self.written) >= MAX_FILES:
            raise PathRefused(f"at most {MAX_FILES} files may be written (nothing was written)")
        # Folders are made one at a time below the checked path: none is a link (resolve).
        here = self.root
        for part in rel.split("/")[:-1]:
            here = here / part
            if not here.exists():
                here.mkdir()
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        self._bytes += grow
        self.written[rel] = len(data)
        self._changed.add(rel)
        return _Outcome(f"wrote {len(data)} bytes to {rel}", path=rel)

    async def _tests(self) -> _Outcome:
        if self.run_tests is None:
            return _Outcome("run_tests is not available in this repository")
        return _Outcome(await self.run_tests(self.root))

    # ---- helpers

    def _files(self) -> list[tuple[str, Path]]:
        """Every regular file of the workspace, sorted, no link followed."""
        out: list[tuple[str, Path]] = []
        for folder, dirs, files in os.walk(self.root, followlinks=False):
            dirs.sort()
            base = Path(folder)
            for name in sorted(files):
                full = base / name
                if full.is_symlink():
                    continue
                out.append((full.relative_to(self.root).as_posix(), full))
        return out

    def _shown(self, rel: str, fits: Callable[[ConstraintPlace], bool]) -> tuple[str, ...]:
        if rel in self._changed:
            return ()
        return tuple(
            dict.fromkeys(p.constraint_id for p in self.places if p.path == rel and fits(p))
        )


def _window(line: str, at: int, width: int) -> str:
    """``line`` cut to :data:`MAX_LINE_CHARS` around the match at ``at``."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    start = max(0, min(at - (MAX_LINE_CHARS - width) // 2, len(line) - MAX_LINE_CHARS))
    piece = line[start : start + MAX_LINE_CHARS]
    return ("…" if start else "") + piece + ("…" if start + MAX_LINE_CHARS < len(line) else "")
