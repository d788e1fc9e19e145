"""Start a stored run again under its id: resume (its missing cells) or retry (its errors).

The runner accepts a run id again only for the identical matrix, so the
arguments must be the run's own: those of the launch that started it when the
studio did, else the run's stored parameters. Runs whose stored parameters are
incomplete (schema 6 marks them ``legacy_params``; see
:func:`cvb_engine.store._migrate_5_to_6`) are refused with the way to resume
them from a terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlmodel import Session

from cvb_engine.lifecycle.process import Launch, LaunchError, launch_of, launch_run
from cvb_engine.monitor import RunProgress
from cvb_engine.run_options import DEFAULT_OPTIONS as D
from cvb_engine.run_options import RunOptions
from cvb_engine.store import Run, database_url, get_engine


def _scenarios_folder(params: dict[str, Any], fallback: Path) -> Path:
    stored = str(params.get("scenarios_path") or "")
    folder = Path(stored) if stored and Path(stored).is_absolute() else None
    return folder if folder is not None and folder.exists() else fallback


def legacy_message(run_id: str) -> str:
    """Why a run marked ``legacy_params`` is not resumed from here, and what to do instead."""
    return (
        f"run {run_id} was stored by an older cvb whose secret filter dropped some of its "
        "parameters (max_tokens, or scenario ids mentioning a key, token, secret or password), "
        "so its matrix cannot be rebuilt from the store. Resume it from a terminal with the "
        "command that started it (same arguments, same --run-id)."
    )


def spec_from_run(
    run_id: str,
    params: dict[str, Any],
    *,
    scenarios_fallback: Path,
    retry_errors: bool = False,
) -> RunOptions:
    """The options that re-create a stored run's matrix (for resume and retry).

    The matrix must be identical for the runner to accept the run id again:
    the same models, scenario ids, arms, repetitions and sampling parameters.
    """
    models = params.get("models") or []
    if not models:
        raise LaunchError(f"run {run_id} stores no models; it cannot be resumed from here")
    if params.get("max_tokens") is None:
        raise LaunchError(legacy_message(run_id))
    seed = params.get("seed")
    return RunOptions(
        scenarios=str(_scenarios_folder(params, scenarios_fallback)),
        base_url=str(params.get("base_url") or ""),
        api_key_env=str(params.get("api_key_env") or ""),
        run_id=run_id,
        endpoint=params.get("endpoint"),
        models=tuple(models),
        only=tuple(sorted(params.get("scenarios") or {})),
        arms=tuple(params.get("arms") or D.arms),
        runs=int(params.get("runs") or 1),
        temperature=float(params.get("temperature") or 0.0),
        max_tokens=int(params["max_tokens"]),
        concurrency=int(params.get("concurrency") or D.concurrency),
        seed=None if seed is None else int(seed),
        timeout_s=float(params.get("timeout_s") or D.timeout_s),
        max_attempts=int(params.get("max_attempts") or D.max_attempts),
        retry_errors=retry_errors,
    )


def _is_legacy(db_url: str, run_id: str) -> bool:
    with Session(get_engine(database_url(db_url))) as session:
        run = session.get(Run, run_id)
        return bool(run is not None and run.legacy_params)


def _again(
    progress: RunProgress, *, db_url: str, logs: Path, scenarios_fallback: Path, retry: bool
) -> Launch:
    """Start a stored run again with its own arguments: those the studio launched it with,
    else (a run started from a terminal) its stored parameters."""
    if progress.active:
        raise LaunchError(f"run {progress.run_id} is still running")
    previous = launch_of(logs, progress.run_id)
    spec = previous.launch_spec() if previous is not None else None
    models = tuple(progress.params.get("models") or ())
    if spec is not None and models:
        # The models the run settled on (a launch without models probed the catalog).
        spec = spec.changed(models=models, retry_errors=retry)
    elif _is_legacy(db_url, progress.run_id):
        raise LaunchError(legacy_message(progress.run_id))
    else:
        spec = spec_from_run(
            progress.run_id,
            progress.params,
            scenarios_fallback=scenarios_fallback,
            retry_errors=retry,
        )
    return launch_run(spec, db_url=db_url, logs=logs, action="retry errors" if retry else "resume")


def resume_run(
    progress: RunProgress, *, db_url: str, logs: Path, scenarios_fallback: Path
) -> Launch:
    """Start the run again under its id: only cells without a successful record are sent."""
    return _again(
        progress, db_url=db_url, logs=logs, scenarios_fallback=scenarios_fallback, retry=False
    )


def retry_errors(
    progress: RunProgress, *, db_url: str, logs: Path, scenarios_fallback: Path
) -> Launch:
    """Send again only the cells stored as API errors (``--retry-errors``)."""
    return _again(
        progress, db_url=db_url, logs=logs, scenarios_fallback=scenarios_fallback, retry=True
    )
