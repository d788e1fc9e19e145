"""The recorder: a child process that commits a run's answers and scores them.

Why a process: the runner's event loop drives the HTTP client, which keeps
one core busy on a fast endpoint. Storing and scoring in threads of the same
process competed with it for the GIL (a run reached a third of a bare
``openai`` loop's throughput); in a child process they run on another core.

How it works:

* The runner starts ``python -m cvb_engine.recorder`` with two pipes and
  speaks length-prefixed pickles to it (both ends are this package, the same
  interpreter): first the run to record (store URL, run id, the scenarios,
  the ids of records to overwrite), then one frame per finished request,
  then a stop frame.
* The recorder's main thread *group-commits*: whatever has arrived is
  inserted in one transaction (Core statements, no ORM), and once that
  transaction is committed it acknowledges every request in it. The runner's
  worker sends its next request only after that acknowledgement, so a
  ``kill -9`` of the run loses at most one answer per worker, as before.
* The recorder's scorer thread scores committed answers as they come (a
  live view sees accuracy grow) and writes each batch of scores in one
  transaction. Answers a kill left unscored are scored when the run resumes,
  and by every recorder of the run once its runner is done (a runner that
  joined the run scores what a killed one left).
* Every transaction is atomic, so a kill of either process at any moment
  leaves no half-written record or half-scored answer.
* The recorder lives exactly as long as the runner's pipe. It runs in a
  session of its own and ignores SIGINT/SIGTERM: the runner decides when it
  stops (after a Ctrl-C or the studio's cancel, in order). When the pipe
  closes without a stop frame (the runner died), it commits what it has
  received, scores what it has committed, and exits: an answer committed
  without its score would read as unscored until someone resumed the run.
* A recorder failure (a database error, a crash, a kill) reaches the runner
  as :class:`RecorderError` with the reason; it never hangs the run.
* Secrets: the store URL (a PostgreSQL URL may hold a password) travels over
  the pipe, not on the command line; the API key's variable is left out of
  the recorder's environment (it sends nothing).
"""

from __future__ import annotations

import collections
import gc
import os
import pickle
import queue
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from cvb_engine.cells import Cell, Finished
from cvb_engine.claims import RELEASE, release_params
from cvb_engine.kinds import RecordStatus
from cvb_engine.prompts import PROMPT_VERSION
from cvb_engine.run.recording import HEADER as _HEADER
from cvb_engine.run.recording import Setup
from cvb_engine.run.recording import frame as _frame
from cvb_engine.store import (
    CheckOutcome,
    ConstraintResult,
    Record,
    Run,
    get_engine,
    score_rows,
    utcnow,
)

HEARTBEAT_S = 2.0
#: Answers longer than this wait for the scorer as a record id only, and are read
#: back from the store when their turn comes: a slow scorer behind a fast endpoint
#: must not hold hundreds of long replies in memory.
INLINE_SCORE_CHARS = 16_384
#: The scorer commits at least this often while it has work, so a live view
#: sees accuracy grow even when checks are slow (``exec`` runs a sandbox).
SCORE_COMMIT_S = 0.5
SCORE_GATHER_S = 0.1  # how long the scorer waits for more answers to score together
SCORE_BATCH = 64  # answers scored in one transaction, at most


# --------------------------------------------------------------------------- the process


class _Outbox:
    """Frames to the runner, from any thread; False once the runner is gone."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, kind: str, value: object) -> bool:
        try:
            with self.lock:
                self.stream.write(_frame((kind, value)))
                self.stream.flush()
            return True
        except (BrokenPipeError, OSError):
            return False


# Record id, scenario id, response (None: read it from the store), finish reason.
ScoreJob = tuple[int, str, str | None, str | None]
# A record's score columns, its constraint rows and its check rows (store.score_rows).
ScoreRows = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]


class _Store:
    """The recorder's statements: Core inserts and updates, a transaction per batch."""

    def __init__(self, setup: Setup) -> None:
        self.run_id = setup.run_id
        self.library = setup.library
        self.stored = dict(setup.stored)
        self.worker = setup.worker
        self.engine = get_engine(setup.url)
        self.record: Table = Record.__table__  # type: ignore[attr-defined]
        self.run: Table = Run.__table__  # type: ignore[attr-defined]
        self.constraint: Table = ConstraintResult.__table__  # type: ignore[attr-defined]
        self.check: Table = CheckOutcome.__table__  # type: ignore[attr-defined]
        self._last_beat = 0.0
        r = self.record
        answer: dict[str, Any] = {
            "status": bindparam("status"),
            "error": bindparam("error"),
            "response": bindparam("response"),
            "latency_s": bindparam("latency_s"),
            "prompt_tokens": bindparam("prompt_tokens"),
            "completion_tokens": bindparam("completion_tokens"),
            "finish_reason": bindparam("finish_reason"),
            "reasoning": bindparam("reasoning"),
            "response_cut": bindparam("response_cut"),
            "error_kind": bindparam("error_kind"),
            "memory_json": bindparam("memory_json"),
            "agent_json": bindparam("agent_json"),
            "worker": bindparam("worker"),
            "created": bindparam("created"),
        }
        # An error record turned into an answer (or a newer error): never touch a
        # record another process has meanwhile stored an answer in.
        self._overwrite = (
            update(r)
            .where(r.c.id == bindparam("rid"), r.c.status != RecordStatus.OK)
            .values(
                **answer,
                attempts=r.c.attempts + bindparam("more_attempts"),
                code=None,
                scored_at=None,
                strict=None,
                stated_passed=None,
                n_constraints=None,
                n_honored=None,
                outcome=None,
                truncated=None,
                scoring_version=None,
            )
        )
        self._score = (
            update(r)
            .where(
                r.c.id == bindparam("rid"),
                r.c.status == RecordStatus.OK,
                r.c.scored_at.is_(None),
            )
            .values(
                code=bindparam("code"),
                strict=bindparam("strict"),
                stated_passed=bindparam("stated_passed"),
                n_constraints=bindparam("n_constraints"),
                n_honored=bindparam("n_honored"),
                outcome=bindparam("outcome"),
                truncated=bindparam("truncated"),
                scoring_version=bindparam("scoring_version"),
                scored_at=bindparam("scored_at"),
            )
        )

    # ---- answers

    def write(self, conn: Connection, items: list[Finished]) -> list[ScoreJob]:
        """Store ``items`` and commit; return the answers to score."""
        now = utcnow()
        try:
            jobs, ids = self._write(conn, items, now)
            conn.commit()
        except IntegrityError:
            # Another process (resuming the same run) stored one of these cells
            # meanwhile: one transaction per item, adopting its record.
            conn.rollback()
            jobs, ids = [], {}
            for item in items:
                try:
                    more, new = self._write(conn, [item], now)
                    conn.commit()
                except IntegrityError:
                    conn.rollback()
                    self._adopt(conn, item.cell)
                    more, new = self._write(conn, [item], now)  # an update now, or a real error
                    conn.commit()
                jobs += more
                ids.update(new)
        self.stored.update(ids)
        return jobs

    def _write(
        self, conn: Connection, items: list[Finished], now: Any
    ) -> tuple[list[ScoreJob], dict[Cell, int]]:
        jobs: list[ScoreJob] = []
        ids: dict[Cell, int] = {}
        new = [i for i in items if i.cell not in self.stored]
        if new:
            rows = [self._row(i, now) for i in new]
            stmt = insert(self.record).returning(self.record.c.id, sort_by_parameter_order=True)
            for item, record_id in zip(new, conn.execute(stmt, rows).scalars(), strict=True):
                ids[item.cell] = record_id
                if item.status == RecordStatus.OK:
                    jobs.append(_job(record_id, item))
        for item in items:
            record_id = self.stored.get(item.cell)
            if record_id is None:
                continue
            params = {**self._answer(item, now), "rid": record_id, "worker": self.worker}
            params["more_attempts"] = item.attempts
            if conn.execute(self._overwrite, params).rowcount and item.status == RecordStatus.OK:
                jobs.append(_job(record_id, item))
        if self.worker is not None:  # the cells have records now: their claims go
            conn.execute(RELEASE, release_params(self.run_id, self.worker, [i.cell for i in items]))
        self._heartbeat(conn, now)
        return jobs, ids

    @staticmethod
    def _answer(item: Finished, now: Any) -> dict[str, Any]:
        return {
            "status": item.status,
            "error": item.error,
            "response": item.response,
            "latency_s": item.latency_s,
            "prompt_tokens": item.prompt_tokens,
            "completion_tokens": item.completion_tokens,
            "finish_reason": item.finish_reason,
            "reasoning": item.reasoning,
            "response_cut": item.response_cut,
            "error_kind": item.error_kind,
            "memory_json": item.memory_json,
            "agent_json": item.agent_json,
            "created": now,
        }

    def _row(self, item: Finished, now: Any) -> dict[str, Any]:
        model, sid, arm, rep = item.cell
        loaded = self.library[sid]
        return {
            **self._answer(item, now),
            "run_id": self.run_id,
            "model": model,
            "scenario_id": sid,
            "scenario_version": loaded.scenario.version,
            "scenario_sha256": loaded.sha256,
            "category": loaded.scenario.category,
            "arm": arm,
            "rep": rep,
            "worker": self.worker,
            "attempts": item.attempts,
            "messages_sha256": item.messages_sha256,
            "prompt_version": PROMPT_VERSION,
        }

    def _adopt(self, conn: Connection, cell: Cell) -> None:
        """Learn the id of a record another process stored for ``cell``."""
        model, sid, arm, rep = cell
        r = self.record
        found = conn.execute(
            sa_select(r.c.id).where(
                r.c.run_id == self.run_id,
                r.c.model == model,
                r.c.scenario_id == sid,
                r.c.arm == arm,
                r.c.rep == rep,
            )
        ).scalar()
        if found is not None:
            self.stored[cell] = found

    def _heartbeat(self, conn: Connection, now: Any) -> None:
        """Refresh ``Run.updated`` (the monitor's sign of life) every few seconds."""
        tick = time.monotonic()
        if tick - self._last_beat < HEARTBEAT_S:
            return
        self._last_beat = tick
        conn.execute(update(self.run).where(self.run.c.id == self.run_id).values(updated=now))

    def beat(self, conn: Connection) -> None:
        self._heartbeat(conn, utcnow())
        conn.commit()

    # ---- scores

    def unscored(self, conn: Connection) -> list[ScoreJob]:
        """Answers of this run that a kill left unscored."""
        r = self.record
        rows = conn.execute(
            sa_select(r.c.id, r.c.scenario_id, r.c.finish_reason).where(
                r.c.run_id == self.run_id, r.c.status == RecordStatus.OK, r.c.scored_at.is_(None)
            )
        ).all()
        conn.rollback()
        # Responses are read one at a time when scored: a resume may find many left.
        return [(rid, sid, None, finish) for rid, sid, finish in rows]

    def score(self, conn: Connection, job: ScoreJob) -> tuple[int, ScoreRows] | None:
        """Score one answer (None when its scenario is not in this run's library)."""
        record_id, sid, response, finish_reason = job
        loaded = self.library.get(sid)
        if loaded is None:
            return None
        agent_json = None
        if response is None:
            r = self.record
            row = conn.execute(
                sa_select(r.c.response, r.c.agent_json).where(r.c.id == record_id)
            ).one()
            response, agent_json = row[0] or "", row[1]
        # Imported here: only the recorder process scores, and the runner that
        # imports this module for its half must not pay for the checks at start-up.
        from cvb_engine.scoring import score_record

        scored = score_record(loaded.scenario, response, finish_reason, agent_json)
        return record_id, score_rows(record_id, scored)

    def save(self, conn: Connection, scored: list[tuple[int, ScoreRows]]) -> int:
        """Store scores in one transaction; return how many answers got theirs."""
        try:
            n = self._save(conn, scored)
            conn.commit()
            return n
        except IntegrityError:
            # A re-score (``cvb score``) raced with us: one transaction per record.
            conn.rollback()
            n = 0
            for one in scored:
                try:
                    n += self._save(conn, [one])
                    conn.commit()
                except IntegrityError:
                    conn.rollback()
            return n

    def _save(self, conn: Connection, scored: list[tuple[int, ScoreRows]]) -> int:
        constraint_rows: list[dict[str, Any]] = []
        check_rows: list[dict[str, Any]] = []
        n = 0
        for record_id, (values, constraints, checks) in scored:
            # Only an answer nobody scored yet: another process resuming the same
            # run may score the same leftovers (its UPDATE then matches nothing).
            if conn.execute(self._score, {**values, "rid": record_id}).rowcount:
                constraint_rows += constraints
                check_rows += checks
                n += 1
        if constraint_rows:
            conn.execute(insert(self.constraint), constraint_rows)
        if check_rows:
            conn.execute(insert(self.check), check_rows)
        return n


class _Frames:
    """Frames from the runner, read off the pipe as they come."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.ready: list[object] = []  # parsed, not yet taken
        self.closed = False  # the runner closed its end (a partial frame is dropped)

    def take(self, timeout: float | None) -> list[object]:
        """Every whole frame that has arrived, waiting up to ``timeout`` for the first.

        Returns ``[]`` on timeout and once the pipe is closed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            frames = self._parse()
            if frames:
                return frames
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], wait)[0]:
                return []
            chunk = os.read(self.fd, 1 << 16)
            if chunk:
                self.buffer += chunk
            else:
                self.closed = True
        return self._parse()

    def _parse(self) -> list[object]:
        frames, self.ready = self.ready, []
        buffer = self.buffer
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            end = _HEADER.size + size
            if len(buffer) < end:
                break
            frames.append(pickle.loads(buffer[_HEADER.size : end]))
            del buffer[:end]
        return frames


class _Process:
    """The recorder process: the main thread receives and commits, a thread scores."""

    def __init__(self, setup: Setup, frames: _Frames, out: _Outbox) -> None:
        self.store = _Store(setup)
        self.frames = frames
        self.out = out
        self.to_score: queue.Queue[ScoreJob | None] = queue.Queue()
        self.scored = 0
        # Whether the scorer, once told to stop, also scores what other processes
        # left unscored (not when the runner died: it then only finishes its own).
        self.sweep = True
        self.scorer = threading.Thread(target=self._guard, args=(self._score,), daemon=True)

    def run(self) -> int:
        self.scorer.start()
        self._guard(self._write)
        self.scorer.join()
        self.store.engine.dispose()  # its connections closed in order, not dropped at exit
        self.out.send("done", self.scored)
        return 0

    def _guard(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except BaseException as exc:  # any failure ends the recorder
            self.out.send("error", _describe(exc))
            os._exit(1)  # every transaction is atomic: nothing is left half-written

    def _write(self) -> None:
        """Group commit: whatever has arrived goes in one transaction, then is acknowledged."""
        with self.store.engine.connect() as conn:
            while True:
                frames = self.frames.take(timeout=HEARTBEAT_S)
                items = [f for f in frames if isinstance(f, tuple)]
                if items:
                    jobs = self.store.write(conn, [item for _, item in items])
                    if not self.out.send("ack", [token for token, _ in items]):
                        self.frames.closed = True
                    for job in jobs:
                        self.to_score.put(job)
                elif not frames and not self.frames.closed:
                    self.store.beat(conn)  # slow replies: still a sign of life
                if None in frames:  # the runner is done: score everything, then exit
                    self.to_score.put(None)
                    return
                if self.frames.closed:
                    # The runner is gone: what was committed stays and gets its score
                    # (each save is atomic); then this process ends, unheard.
                    self.sweep = False
                    self.to_score.put(None)
                    return

    def _score(self) -> None:
        with self.store.engine.connect() as conn:
            for job in self.store.unscored(conn):  # left by a kill; scored first
                self.to_score.put(job)
            stop = False
            while not stop:
                # Gather answers for a moment: one transaction for a few dozen
                # answers costs much less than one each, and a live view still
                # sees accuracy grow several times a second.
                pending = [self.to_score.get()]
                until = time.monotonic() + SCORE_GATHER_S
                while len(pending) < SCORE_BATCH and None not in pending:
                    try:
                        pending.append(
                            self.to_score.get(timeout=max(0.0, until - time.monotonic()))
                        )
                    except queue.Empty:
                        break
                stop = None in pending
                self._score_all(conn, [j for j in pending if j is not None])
            if self.sweep:
                # Answers another runner of this run committed and never scored (it was
                # killed between the two): this runner is the last chance before a resume.
                self._score_all(conn, self.store.unscored(conn))

    def _score_all(self, conn: Connection, pending: list[ScoreJob]) -> None:
        jobs = collections.deque(pending)
        while jobs:
            # Commit every SCORE_COMMIT_S at least: slow checks still show progress.
            started = time.monotonic()
            scored: list[tuple[int, ScoreRows]] = []
            while (
                jobs and len(scored) < SCORE_BATCH and time.monotonic() - started < SCORE_COMMIT_S
            ):
                one = self.store.score(conn, jobs.popleft())
                if one is not None:
                    scored.append(one)
            self.scored += self.store.save(conn, scored)


def _job(record_id: int, item: Finished) -> ScoreJob:
    response = item.response or ""
    # An agent cell is scored from its files (in its trace): read back from the store.
    inline = len(response) <= INLINE_SCORE_CHARS and item.agent_json is None
    return (
        record_id,
        item.cell[1],
        response if inline else None,
        item.finish_reason,
    )


def _describe(exc: BaseException) -> str:
    """A failure in one line: the driver's own message, not the SQL with its parameters."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def _import_scoring() -> None:
    """Import what scoring needs, every check kind's module included (the first score
    would import them), then keep what is imported out of the collector's full passes:
    it lives as long as this process, and the first full pass, due soon after the
    imports, would otherwise walk every module's objects while an answer waits."""
    import cvb_engine.scoring  # noqa: F401
    from cvb_engine.checks.base import registry

    registry()
    gc.freeze()


def main() -> int:
    # The runner decides when to stop (the pipe closing says it is gone).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Keep the pipes to ourselves: anything else printing (or a sandboxed check's
    # process inheriting fd 1) must not corrupt the frames.
    frames = _Frames(os.dup(0))
    out = _Outbox(os.fdopen(os.dup(1), "wb"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    # The scorer thread is CPU-bound; the main thread wakes on I/O and must get
    # the GIL at once, or every acknowledgement (and so the runner's next
    # request) waits for up to the default 5 ms switch interval.
    sys.setswitchinterval(0.0005)
    # The scoring modules (checks, extraction: a good part of a second) are imported on a
    # thread of their own, while the runner still probes its endpoint and binds the run:
    # the first answers are committed (and the runner's workers go on) without waiting
    # for them; only their scores do.
    threading.Thread(target=_import_scoring, name="imports", daemon=True).start()
    setup, *frames.ready = frames.take(timeout=None) or [None]
    if not isinstance(setup, Setup):
        return 0  # the runner stopped before it bound a run
    try:
        process = _Process(setup, frames, out)
    except Exception as exc:
        out.send("error", _describe(exc))
        return 1
    return process.run()


if __name__ == "__main__":
    # Run the imported module, not __main__: the frames unpickle to its classes.
    from cvb_engine.recorder import main as _main

    code = _main()
    # Everything is committed and the runner told: the interpreter's teardown (the
    # store's and the checks' modules, about a tenth of a second) would only keep the
    # runner waiting for this process to end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
