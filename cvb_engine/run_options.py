"""The options of one ``cvb run``: one typed model for the CLI, the runner and the Run page.

The CLI parses its flags into a :class:`RunOptions` (:func:`cvb_engine.cli.run.options_from_args`),
the runner runs one (:class:`cvb_engine.run.BenchmarkRun`), and the studio builds one
from its widgets and launches it as the equivalent ``cvb run`` command line
(:func:`cvb_engine.lifecycle.run_arguments`, the inverse of the CLI's parse). The
defaults live here once; the Run page starts its widgets from them.

No field holds a secret: the key is named by its environment variable
(``api_key_env``), never given.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cvb_engine.claims import LEASE_S
from cvb_engine.library import scenarios_root
from cvb_engine.replies import MAX_RESPONSE_CHARS
from cvb_engine.scenario import ARMS

#: Each option's ``cvb run`` flag, where it is not the field's name spelled with dashes.
FLAGS: dict[str, str] = {
    "timeout_s": "--timeout",
    "retry_after_cap_s": "--retry-after-cap",
    "lease_s": "--lease",
}

#: The options that make a run's matrix (what ``--join`` reads from the store).
MATRIX_OPTIONS = (
    "scenarios",
    "models",
    "arms",
    "memory_sweep",
    "runs",
    "categories",
    "only",
    "temperature",
    "max_tokens",
    "seed",
)


def flag(name: str) -> str:
    """The ``cvb run`` flag of the option ``name``: ``max_tokens`` → ``--max-tokens``."""
    return FLAGS.get(name) or "--" + name.replace("_", "-")


class RunOptions(BaseModel):
    """What one ``cvb run`` is asked to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # default: $CVB_SCENARIOS, else the shipped library (package data)
    scenarios: str = Field(default_factory=lambda: str(scenarios_root()))
    # empty: probe the endpoint's catalog (or take its preset's models)
    models: tuple[str, ...] = ()
    arms: tuple[str, ...] = ARMS
    runs: int = 3
    categories: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # scenario ids; wins over categories
    endpoint: str | None = None  # a preset's name
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key
    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = 20260729  # None sends none (``--seed -1``)
    concurrency: int = 8
    timeout_s: float = 60.0
    max_attempts: int = 5
    retry_after_cap_s: float = 60.0
    max_response_chars: int = MAX_RESPONSE_CHARS
    run_id: str | None = None  # None: a fresh id
    retry_errors: bool = False
    db: str | None = None  # None: $CVB_DATABASE_URL or data/cvb.db
    note: str | None = None
    # the sandbox backend the user named (--sandbox); None: bwrap or $CVB_SANDBOX
    sandbox: str | None = None
    # --memory-sweep specs (key=v1,v2): their incentivized variants join the arms
    memory_sweep: tuple[str, ...] = ()
    # --join: take part in the existing run --run-id, its matrix read from the store
    join: bool = False
    # USD per million tokens for every model of the run (--price-in/--price-out, both or
    # neither); None: the configured prices (cvb_engine.cost), else unknown
    price_in: float | None = None
    price_out: float | None = None
    # the runner's name on its records and claims (--worker); None: host:pid
    worker: str | None = None
    # seconds a claim on a cell lasts unless renewed (--lease, hidden: for tests)
    lease_s: float = LEASE_S
    # the matrix options the caller set (with join, the others come from the store);
    # None: those that differ from these defaults
    given: frozenset[str] | None = None

    @field_validator("models", "arms", "categories", "only", "memory_sweep", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return () if value is None else value

    def given_matrix(self) -> frozenset[str]:
        """The matrix options set by the caller: :attr:`given`, else those off their default."""
        if self.given is not None:
            return self.given
        defaults = RunOptions()
        return frozenset(f for f in MATRIX_OPTIONS if getattr(self, f) != getattr(defaults, f))

    def changed(self, **update: Any) -> RunOptions:
        """A copy with ``update`` applied, validated like a new model."""
        return RunOptions.model_validate({**self.model_dump(), **update})


#: The defaults, for those who show or compare them (the Run page's widgets start here).
DEFAULT_OPTIONS = RunOptions()
