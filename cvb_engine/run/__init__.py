"""The runner: models × scenarios × arms × repetitions against an OpenAI-compatible endpoint.

Guarantees:

* **Nothing lost.** Every finished request is committed as soon as it
  arrives, and scored right after, by a recorder process
  (:mod:`cvb_engine.recorder`); a worker sends its next request only once its
  last answer is committed, so a ``kill -9`` loses at most the requests in
  flight (one per worker). Answers a kill left unscored are scored on resume.
* **Nothing twice.** A cell (run, model, scenario, arm, rep) is unique in the
  store; re-running a run id sends only the cells without a successful record
  and overwrites error records in place. Runners that share a run (``--join``,
  on any machine) claim its cells in batches with leases (:mod:`cvb_engine.claims`):
  no cell is sent by two healthy runners.
* **Nothing mixed.** A run id is bound to its matrix (models, scenario
  versions, arms, repetitions, sampling parameters, prompt version); a
  different matrix under the same id is refused.
* **API failures are not violations.** 429 (honouring ``Retry-After`` up to a
  cap), 5xx, timeouts, dropped connections, malformed bodies, empty content
  and empty ``choices`` are retried with backoff; what still fails becomes an
  error record, excluded from accuracy.
* **Every reply is a record**. Whatever an endpoint sends, or
  whatever reading it raises, its cell gets an ok or an error record and the
  run goes on (:mod:`cvb_engine.replies` reads and validates the bytes).
  Bodies are read with a bound, replies longer than ``--max-response-chars``
  are stored cut there and flagged (``response_cut``), and every server string
  is scrubbed of the key before it is stored or shown. A run is ``finished``
  only when every cell of its matrix has a record; otherwise it ends
  ``incomplete`` and a resume sends the cells without a record first.

The package, one concern a module:

* :mod:`~cvb_engine.run.plan` — the :data:`Cell`, the :class:`Matrix`, which scenarios;
* :mod:`~cvb_engine.run.validate` — the options' own checks (pure);
* :mod:`~cvb_engine.run.client` — one request, retries, the model catalog;
* :mod:`~cvb_engine.run.binding` — create or resume the run in the store;
* :mod:`~cvb_engine.run.progress` — counters and the terminal's progress line;
* :mod:`~cvb_engine.run.execute` — :class:`BenchmarkRun`: workers, recorder, claims;
* :mod:`~cvb_engine.run.status` — the run's end as a pure decision (``final_status``);
* :mod:`~cvb_engine.run.dry_run` — ``cvb run --dry-run``.

Names are imported when first used (as in :mod:`cvb_engine`): the claims and the
recorder import :mod:`~cvb_engine.run.plan` without pulling in the HTTP client.
``python -m cvb_engine.runner`` is ``cvb run`` (:mod:`cvb_engine.cli.run`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvb_engine.run.binding import join_options
    from cvb_engine.run.client import call_once, call_with_retries, make_client, probe_catalog
    from cvb_engine.run.dry_run import print_dry_run
    from cvb_engine.run.errors import FatalEndpointError, RunError
    from cvb_engine.run.execute import BenchmarkRun, RunOutcome, layer_state_root
    from cvb_engine.run.plan import Cell, Matrix, diff_matrices, pool_path, select_scenarios
    from cvb_engine.run.progress import Progress, TerminalProgress
    from cvb_engine.run.status import FinalStatus, final_status
    from cvb_engine.run_options import RunOptions

_WHERE: dict[str, str] = {
    "BenchmarkRun": "cvb_engine.run.execute",
    "Cell": "cvb_engine.run.plan",
    "FatalEndpointError": "cvb_engine.run.errors",
    "FinalStatus": "cvb_engine.run.status",
    "Matrix": "cvb_engine.run.plan",
    "Progress": "cvb_engine.run.progress",
    "RunError": "cvb_engine.run.errors",
    "RunOptions": "cvb_engine.run_options",
    "RunOutcome": "cvb_engine.run.execute",
    "TerminalProgress": "cvb_engine.run.progress",
    "call_once": "cvb_engine.run.client",
    "call_with_retries": "cvb_engine.run.client",
    "diff_matrices": "cvb_engine.run.plan",
    "final_status": "cvb_engine.run.status",
    "join_options": "cvb_engine.run.binding",
    "layer_state_root": "cvb_engine.run.execute",
    "make_client": "cvb_engine.run.client",
    "pool_path": "cvb_engine.run.plan",
    "print_dry_run": "cvb_engine.run.dry_run",
    "probe_catalog": "cvb_engine.run.client",
    "select_scenarios": "cvb_engine.run.plan",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'cvb_engine.run' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "BenchmarkRun",
    "Cell",
    "FatalEndpointError",
    "FinalStatus",
    "Matrix",
    "Progress",
    "RunError",
    "RunOptions",
    "RunOutcome",
    "TerminalProgress",
    "call_once",
    "call_with_retries",
    "diff_matrices",
    "final_status",
    "join_options",
    "layer_state_root",
    "make_client",
    "pool_path",
    "print_dry_run",
    "probe_catalog",
    "select_scenarios",
]
