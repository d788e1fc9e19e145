"""CVB engine: scenarios, checks, prompts, storage, scoring, metrics and reports.

The studio and the CLI import from here; nothing in this package imports a UI
library (streamlit, plotly, pygments) — a test enforces it.
"""

from cvb_engine.checks import CheckKind, CheckResult, Span, Subject, get_kind, registry
from cvb_engine.extract import OUTCOMES, Extraction, extract, extract_code
from cvb_engine.lint import Finding, has_errors, imperative_words, lint_paths, lint_text
from cvb_engine.memory_pool import EntryKind, Pool, PoolEntry, PoolError, draw, load_pool
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
    "registry",
    "run_id_problem",
    "score_code",
    "score_response",
    "summarize",
    "summarize_rows",
    "terminal_text",
]
