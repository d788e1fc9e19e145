"""Every cache of the studio: the Streamlit wrappers around engine and authoring calls.

Reruns repeat the same calls with the same inputs (every widget change reruns the
page). Each wrapper is bounded, and keyed by what makes its answer change: file
stamps and texts for the Author page, folder stamps for the Run page, the store's
URL, run ids and a data version (record count, highest id, latest scoring time)
for the Results page, so a changed file, a live run or a re-score is a new entry
and nothing is served stale. Nothing else in the studio calls ``st.cache_*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from cvb_engine import (
    Aggregates,
    CellChoices,
    CellRecord,
    CostRow,
    DataVersion,
    Flakiness,
    IVRSummary,
    LoadedScenario,
    PairedComparison,
    Reference,
    RunEstimate,
    RunInfo,
    RunOptions,
    ScenarioError,
    Scored,
    build_messages,
    database_url,
    estimate_launch,
    get_engine,
    load_file,
    load_library,
    messages_sha256,
    scenario_file,
    scenario_files,
    scenario_id_problem,
)
from cvb_engine import aggregates as _aggregates
from cvb_engine import authoring as au
from cvb_engine import cell_choices as _cell_choices
from cvb_engine import cell_records as _cell_records
from cvb_engine import compare_groups as _compare_groups
from cvb_engine import data_version as _data_version
from cvb_engine import export_results as _export_results
from cvb_engine import flakiness as _flakiness
from cvb_engine import ivr_results as _ivr_results
from cvb_engine import list_runs as _list_runs
from cvb_engine import load_reference as _load_reference
from cvb_engine import pair_models as _pair_models
from cvb_engine import pair_runs as _pair_runs
from cvb_engine import run_costs as _run_costs
from cvb_engine import verdicts as _verdicts

# Figures for a handful of run selections, a few dozen cells.
AGG_CACHE: dict[str, Any] = {"max_entries": 16, "ttl": 3600, "show_spinner": False}
CELL_CACHE: dict[str, Any] = {"max_entries": 64, "ttl": 3600, "show_spinner": False}


# --------------------------------------------------------------------------- Author


@st.cache_data(max_entries=2048, show_spinner=False)
def file_report(file_stamp: au.Stamp) -> au.FileReport:
    return au.file_report(Path(file_stamp[0]))


def library_view(root: Path, drafts: Path) -> tuple[list[au.LibraryEntry], list[LoadedScenario]]:
    """:func:`cvb_engine.authoring.library_view`, each file's report cached by its stamp."""
    return au.library_view(root, drafts, report_of=file_report)


@st.cache_data(max_entries=64, show_spinner=False)
def lint(
    text: str, root: str, fallback: str, library_stamps: tuple[au.Stamp, ...]
) -> au.EditorLint:
    items = [r.item for r in (file_report(s) for s in library_stamps) if r.item is not None]
    return au.lint_editor(text, Path(root), items, Path(fallback))


@st.cache_data(max_entries=64, show_spinner=False)
def score(text: str, path: str, code: str) -> Scored | None:
    return au.score_text(text, path, code)


@st.cache_data(max_entries=32, show_spinner=False)
def samples(text: str, path: str) -> list[au.SampleVerdict]:
    return au.sample_verdicts_of_text(text, path)


# --------------------------------------------------------------------------- Run


@st.cache_data(max_entries=4, ttl=300, show_spinner=False)
def scenario_library(folder: str, stamps: tuple[tuple[str, int, int], ...]) -> Any:
    """The loaded library, or the loader's message; ``stamps`` make a changed file a new entry."""
    try:
        return load_library(folder)
    except ScenarioError as exc:
        return str(exc)


@st.cache_data(max_entries=16, ttl=300, show_spinner=False)
def run_estimate(
    folder: str, stamps: tuple[tuple[str, int, int], ...], spec_json: str
) -> RunEstimate | None:
    """The tokens and cost a launch of the spec would send (:func:`cvb_engine.estimate_launch`),
    or None; building every arm's messages takes a moment, so reruns that leave the spec
    alone reuse it."""
    library = scenario_library(folder, stamps)
    if isinstance(library, str):
        return None
    return estimate_launch(RunOptions.model_validate_json(spec_json), library)


def library_stamps(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in scenario_files([folder]):
        try:
            info = path.stat()
        except OSError:
            continue  # removed meanwhile
        out.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(out)


# --------------------------------------------------------------------------- the store and Results


@st.cache_resource(show_spinner=False)
def store_engine(url: str) -> Engine:
    """The store's engine, one per URL for every session of this studio process."""
    return get_engine(url)


def _session() -> Session:
    return Session(store_engine(database_url()), expire_on_commit=False)


@st.cache_data(max_entries=4, ttl=5, show_spinner=False)
def runs_list(url: str) -> list[RunInfo]:
    with _session() as session:
        return _list_runs(session)


def version_of(run_ids: tuple[str, ...] | list[str]) -> DataVersion:
    """Not cached: what the cached figures are keyed by."""
    with _session() as session:
        return _data_version(session, run_ids)


@st.cache_data(**AGG_CACHE)
def aggregates(url: str, run_ids: tuple[str, ...], version: DataVersion) -> Aggregates:
    with _session() as session:
        return _aggregates(session, run_ids)


@st.cache_data(**AGG_CACHE)
def ivr_results(
    url: str, run_ids: tuple[str, ...], version: DataVersion
) -> dict[tuple[str, str], IVRSummary]:
    with _session() as session:
        return _ivr_results(session, run_ids)


@st.cache_data(**AGG_CACHE)
def cell_choices(url: str, run_id: str, version: DataVersion) -> CellChoices:
    with _session() as session:
        return _cell_choices(session, run_id)


@st.cache_data(**CELL_CACHE)
def cell(
    url: str, run_id: str, model: str, sid: str, rep: int, version: DataVersion
) -> dict[str, CellRecord]:
    with _session() as session:
        return _cell_records(session, run_id, model, sid, rep)


@st.cache_data(**AGG_CACHE)
def run_costs(
    url: str, run_ids: tuple[str, ...], version: DataVersion
) -> list[tuple[str, list[CostRow]]]:
    """Each run's cost per model × arm, at the prices it stored or the configured ones."""
    with _session() as session:
        return [(rid, _run_costs(_export_results(session, rid))) for rid in run_ids]


@st.cache_data(**AGG_CACHE)
def paired_runs(
    url: str, run_a: str, run_b: str, versions: tuple[DataVersion, DataVersion]
) -> tuple[list[PairedComparison], list[Flakiness], list[Flakiness]]:
    """B against A on their shared cells, and each run's flakiness."""
    with _session() as session:
        a = _verdicts(_export_results(session, run_a)["records"])
        b = _verdicts(_export_results(session, run_b)["records"])
    return _compare_groups(_pair_runs(a, b)), _flakiness(a), _flakiness(b)


@st.cache_data(**AGG_CACHE)
def paired_models(
    url: str, run_id: str, model_a: str, model_b: str, version: DataVersion
) -> list[PairedComparison]:
    """Model B against model A on the cells of ``run_id`` both answered."""
    with _session() as session:
        found = _verdicts(_export_results(session, run_id)["records"])
    return _compare_groups(_pair_models(found, model_a, model_b))


@st.cache_data(max_entries=1, show_spinner=False)
def reference() -> Reference | None:
    return _load_reference()


@st.cache_data(max_entries=64, ttl=60, show_spinner=False)
def prompts_for(root: str, scenario_id: str) -> dict[str, Any] | None:
    """The messages each arm would receive now, rebuilt from the scenario file (or None)."""
    if scenario_id_problem(scenario_id) is not None:
        return None  # not a scenario id: never a file name (the view says so)
    path = scenario_file(root, scenario_id)
    if path is None:
        return None
    try:
        loaded = load_file(path)
    except Exception:  # a broken file is the Author page's business; show no prompts
        return None
    arms = {}
    for arm in ("cold", "mandated", "incentivized"):
        messages = build_messages(loaded.scenario, arm)
        arms[arm] = {"messages": messages, "sha256": messages_sha256(messages)}
    return {"path": str(path), "sha256": loaded.sha256, "arms": arms}
