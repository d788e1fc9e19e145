"""The ``cvb`` command: a table of subcommands, each defined by a module of this package.

* :data:`PLUGINS` names every subcommand, the module that defines it and its summary;
  ``main`` imports only the module of the command given, so ``cvb --help`` and
  ``cvb lint`` never load the store, numpy or the openai client
  (tests/test_cli_help.py keeps it so).
* A command module registers its argument setup and handler with :func:`command`;
  the engine modules it calls know nothing of the CLI.
* The engine raises its own errors (a run that cannot start, a sandbox that does not
  work, a store too old …); :func:`main` shows those of :data:`ERRORS` as
  ``cvb: message`` with exit status 2, like a :class:`CliError`.

``python -m cvb_engine.cli`` is ``cvb``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from cvb_engine.cli.parser import HelpFormatter, Parser
from cvb_engine.plugin_registry import Registry, origin_of
from cvb_engine.safe_text import terminal_text

__all__ = ["ERRORS", "PLUGINS", "CliError", "build_parser", "command", "main"]

Handler = Callable[[argparse.Namespace], int]
Setup = Callable[[argparse.ArgumentParser], None]

#: The subcommands whose module has been imported: their argument setup and handler.
#: Nothing is loaded to list them: :data:`PLUGINS` does that without any import.
_COMMANDS: Registry[tuple[Setup, Handler]] = Registry("command")

#: Every subcommand, in the order a user meets them (``cvb --help`` lists them so): the
#: module that defines it, imported only when it is the command
#: given, and the first line of its handler's docstring, which `cvb --help` lists
#: without importing it (tests/test_cli_help.py checks that the two agree).
PLUGINS: dict[str, tuple[str, str]] = {
    "doctor": (
        "cvb_engine.cli.doctor",
        "Say what this machine offers (sandbox, store, local model, browser) and how to fix what is missing.",
    ),
    "demo": (
        "cvb_engine.cli.local",
        "The first-run demo: a small matrix against the bundled local model (or a preset).",
    ),
    "run": (
        "cvb_engine.cli.run",
        "Run the benchmark matrix against an OpenAI-compatible endpoint.",
    ),
    "report": (
        "cvb_engine.cli.report",
        "Report a stored run or a results file: Markdown, JSON, CSV, HTML.",
    ),
    "studio": ("cvb_engine.cli.studio", "Start the Streamlit studio (Author, Run, Results)."),
    "lint": (
        "cvb_engine.cli.lint",
        "Lint scenario files: file:line: CODE message; exit 1 on any error.",
    ),
    "score": (
        "cvb_engine.cli.score",
        "Re-score stored outputs with the current checks (no API call).",
    ),
    "audit": (
        "cvb_engine.cli.audit",
        "Audit the IVR pack: canonical solutions at IVR 0, reference solutions bite, no leaks.",
    ),
    "db": ("cvb_engine.cli.db", "Store version, migrations and copying runs between stores."),
    "serve-local": (
        "cvb_engine.cli.local",
        "Serve the bundled SmolLM2-135M model on 127.0.0.1 (OpenAI-compatible).",
    ),
}


class CliError(Exception):
    """A user-facing error of a command's own: printed as ``cvb: message`` with exit status 2."""


#: The engine's errors a command may end with, each by the module that defines it (a
#: module never imported raised none, so :func:`main` imports none to look), and what
#: comes before its message. Shown as ``cvb: message``, exit status 2.
ERRORS: tuple[tuple[str, str, str], ...] = (
    ("cvb_engine.cost", "PriceError", ""),
    ("cvb_engine.endpoints", "EndpointError", ""),
    ("cvb_engine.ivr", "HumanEvalMissing", ""),
    ("cvb_engine.local", "LocalModelError", ""),
    ("cvb_engine.rescore", "RescoreError", ""),
    ("cvb_engine.results", "ResultsFileError", ""),
    ("cvb_engine.run.errors", "RunError", ""),
    ("cvb_engine.sandbox", "SandboxError", ""),
    ("cvb_engine.scenario", "ScenarioError", "scenarios do not load:\n"),
    ("cvb_engine.store", "StoreError", ""),
)


def command(name: str, setup: Setup) -> Callable[[Handler], Handler]:
    """Register subcommand ``name`` (listed in :data:`PLUGINS`): its argument setup and
    its handler, whose docstring's first line is the command's summary."""

    def decorate(fn: Handler) -> Handler:
        _COMMANDS.add(name, (setup, fn), origin_of(fn))
        return fn

    return decorate


def build_parser(command_name: str | None = None) -> argparse.ArgumentParser:
    """The ``cvb`` parser, with the arguments of ``command_name`` (the others are listed
    with their summary only)."""
    parser = Parser(
        prog="cvb", description="Constraint-Violation Benchmark: lint, run, score, report."
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the package, prompt and scoring versions"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command_name in PLUGINS:
        importlib.import_module(PLUGINS[command_name][0])  # registers its commands
    for name, (_, summary) in PLUGINS.items():
        p = sub.add_parser(name, help=summary, description=summary, formatter_class=HelpFormatter)
        if name in _COMMANDS:
            setup, handler = _COMMANDS.lookup(name)
            setup(p)
            p.set_defaults(handler=handler)
        else:
            p.set_defaults(handler=_unloaded(name))
    return parser


def version_text() -> str:
    """What ``cvb --version`` prints: the package, prompt and scoring versions (a stored
    record names the last two, so a result can be matched to the code that made it)."""
    from importlib.metadata import PackageNotFoundError, version

    from cvb_engine.prompts import PROMPT_VERSION
    from cvb_engine.scoring import SCORING_VERSION

    try:
        package = version("cvb-studio")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, never installed
        package = "unknown (not installed)"
    return (
        f"cvb-studio {package}\nprompt version {PROMPT_VERSION}\nscoring version {SCORING_VERSION}"
    )


class _VersionAction(argparse.Action):
    """``--version``: the versions are read only when asked (``cvb --help`` stays light)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_text())
        parser.exit(0)


def _unloaded(name: str) -> Handler:
    """The handler of a subcommand listed without its module; reached only when the
    command name is not the first word (``main`` loads the module it names)."""

    def handler(args: argparse.Namespace) -> int:
        raise CliError(f"put the command first: cvb {name} ...")

    return handler


def _loaded(module: str, name: str) -> Any:
    """Attribute ``name`` of ``module`` if that module has been imported, else None."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def _message(exc: Exception) -> str | None:
    """What ``cvb`` prints for ``exc`` (after ``cvb: ``), or None when it is a bug."""
    if isinstance(exc, CliError):
        return str(exc)
    for module, name, prefix in ERRORS:
        error_type = _loaded(module, name)
        if error_type is not None and isinstance(exc, error_type):
            return f"{prefix}{exc}"
    return None


@contextlib.contextmanager
def _warnings_shown_as_messages() -> Iterator[None]:
    """A weaker sandbox named with ``--sandbox`` (a ``WeakSandboxWarning``) is said as
    ``cvb: warning: ...`` each time it is warned about; other warnings as usual."""
    with warnings.catch_warnings():
        weak = _loaded("cvb_engine.sandbox", "WeakSandboxWarning")
        if weak is None:  # the command's module chooses no sandbox
            yield
            return
        warnings.simplefilter("always", weak)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, weak):
                print(f"cvb: warning: {message}", file=sys.stderr)
            else:
                shown(message, category, *rest, **kw)

        warnings.showwarning = show
        yield


def program() -> NoReturn:
    """The ``cvb`` program (its console script, ``python -m cvb_engine.cli``): :func:`main`
    on the process's arguments, then exit with its status.

    Before exiting, every object is frozen out of the collector's reach: the process
    ends next, and the interpreter's teardown then takes a fiftieth of a second instead
    of a quarter (the HTTP client's, the store's and the scenarios' objects, collected
    one by one otherwise; measured after a one-request ``cvb run``). Exit handlers still
    run. Not in :func:`main`, which tests call many times in one process.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``cvb`` with ``argv`` (default: the process's arguments); the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(first).parse_args(argv)
    try:
        with _warnings_shown_as_messages():
            return int(args.handler(args))
    except Exception as exc:
        message = _message(exc)
        if message is None:
            raise
        # Messages quote servers (API error reasons), files and names: shown as text.
        print(f"cvb: {terminal_text(message)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cvb: interrupted", file=sys.stderr)
        return 130
