"""CVB engine: scenarios, checks, prompts, storage, scoring, metrics and reports.

The studio and the CLI import from here; nothing in this package imports a UI
library (streamlit, plotly, pygments) — a test enforces it.

Names are imported when first used (PEP 562): ``import cvb_engine`` — and so
``cvb --help`` — costs nothing until something is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvb_engine.checks import CheckKind, CheckResult, Span, Subject, get_kind, registry
    from cvb_engine.extract import OUTCOMES, Extraction, extract, extract_code
    from cvb_engine.lint import Finding, has_errors, imperative_words, lint_paths, lint_text
    from cvb_engine.memory_pool import EntryKind, Pool, PoolEntry, PoolError, draw, load_pool
    from cvb_engine.memory_trace import Trace, read_trace
    from cvb_engine.metrics import RecordRow, Summary, summarize, summarize_rows
    from cvb_engine.prompts import PROMPT_VERSION, build_messages, messages_sha256
    from cvb_engine.run_ids import RUN_ID_RULE, new_run_id, run_id_problem
    from cvb_engine.safe_text import csv_cell, markdown_text, terminal_text
    from cvb_engine.scenario import (
        ARMS,
        CANARY,
        CATEGORIES,
        CVB_CATEGORIES,
        LoadedScenario,
        Scenario,
        ScenarioError,
        load_file,
        load_library,
        load_text,
    )
    from cvb_engine.scoring import SCORING_VERSION, Scored, score_code, score_response

#: Where each public name lives.
_WHERE: dict[str, str] = {
    "ARMS": "cvb_engine.scenario",
    "CANARY": "cvb_engine.scenario",
    "CATEGORIES": "cvb_engine.scenario",
    "CVB_CATEGORIES": "cvb_engine.scenario",
    "CheckKind": "cvb_engine.checks",
    "CheckResult": "cvb_engine.checks",
    "EntryKind": "cvb_engine.memory_pool",
    "Extraction": "cvb_engine.extract",
    "Finding": "cvb_engine.lint",
    "LoadedScenario": "cvb_engine.scenario",
    "OUTCOMES": "cvb_engine.extract",
    "PROMPT_VERSION": "cvb_engine.prompts",
    "Pool": "cvb_engine.memory_pool",
    "PoolEntry": "cvb_engine.memory_pool",
    "PoolError": "cvb_engine.memory_pool",
    "RUN_ID_RULE": "cvb_engine.run_ids",
    "RecordRow": "cvb_engine.metrics",
    "SCORING_VERSION": "cvb_engine.scoring",
    "Scenario": "cvb_engine.scenario",
    "ScenarioError": "cvb_engine.scenario",
    "Scored": "cvb_engine.scoring",
    "Span": "cvb_engine.checks",
    "Subject": "cvb_engine.checks",
    "Summary": "cvb_engine.metrics",
    "Trace": "cvb_engine.memory_trace",
    "build_messages": "cvb_engine.prompts",
    "csv_cell": "cvb_engine.safe_text",
    "draw": "cvb_engine.memory_pool",
    "extract": "cvb_engine.extract",
    "extract_code": "cvb_engine.extract",
    "get_kind": "cvb_engine.checks",
    "has_errors": "cvb_engine.lint",
    "imperative_words": "cvb_engine.lint",
    "lint_paths": "cvb_engine.lint",
    "lint_text": "cvb_engine.lint",
    "load_file": "cvb_engine.scenario",
    "load_library": "cvb_engine.scenario",
    "load_pool": "cvb_engine.memory_pool",
    "load_text": "cvb_engine.scenario",
    "markdown_text": "cvb_engine.safe_text",
    "messages_sha256": "cvb_engine.prompts",
    "new_run_id": "cvb_engine.run_ids",
    "read_trace": "cvb_engine.memory_trace",
    "registry": "cvb_engine.checks",
    "run_id_problem": "cvb_engine.run_ids",
    "score_code": "cvb_engine.scoring",
    "score_response": "cvb_engine.scoring",
    "summarize": "cvb_engine.metrics",
    "summarize_rows": "cvb_engine.metrics",
    "terminal_text": "cvb_engine.safe_text",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'cvb_engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "ARMS",
    "CANARY",
    "CATEGORIES",
    "CVB_CATEGORIES",
    "OUTCOMES",
    "PROMPT_VERSION",
    "RUN_ID_RULE",
    "SCORING_VERSION",
    "CheckKind",
    "CheckResult",
    "EntryKind",
    "Extraction",
    "Finding",
    "LoadedScenario",
    "Pool",
    "PoolEntry",
    "PoolError",
    "RecordRow",
    "Scenario",
    "ScenarioError",
    "Scored",
    "Span",
    "Subject",
    "Summary",
    "Trace",
    "build_messages",
    "csv_cell",
    "draw",
    "extract",
    "extract_code",
    "get_kind",
    "has_errors",
    "imperative_words",
    "lint_paths",
    "lint_text",
    "load_file",
    "load_library",
    "load_pool",
    "load_text",
    "markdown_text",
    "messages_sha256",
    "new_run_id",
    "read_trace",
    "registry",
    "run_id_problem",
    "score_code",
    "score_response",
    "summarize",
    "summarize_rows",
    "terminal_text",
]
