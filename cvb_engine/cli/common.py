"""Arguments and values several commands share: ``--sandbox``, the default run, a store's name."""

from __future__ import annotations

import argparse

from cvb_engine import sandbox
from cvb_engine.cli import CliError


def add_sandbox_argument(p: argparse.ArgumentParser) -> None:
    """``--sandbox``: the only way, with ``CVB_SANDBOX``, to run model code on a backend
    weaker than bwrap (chosen by :func:`cvb_engine.sandbox.choose`)."""
    p.add_argument(
        "--sandbox",
        choices=sandbox.BACKENDS,
        default=None,
        help="where model code runs (default: bwrap, and nothing runs without it; "
        "unshare and plain are weaker and used only when named here or in $CVB_SANDBOX)",
    )


def store_label(db: str | None) -> str:
    """The store ``--db`` (or the default) names, without its password."""
    from sqlalchemy.engine import make_url

    from cvb_engine.store import database_url

    return make_url(database_url(db)).render_as_string(hide_password=True)


def latest_run_id(db: str | None) -> str:
    """A RUN_ID argument's default: the store's latest run."""
    from sqlmodel import col, select

    from cvb_engine.store import Run, session_scope

    with session_scope(db) as session:
        run = session.exec(select(Run).order_by(col(Run.created).desc())).first()
        if run is None:
            raise CliError(f"no runs in {store_label(db)}; start one with `cvb run`")
        return run.id
