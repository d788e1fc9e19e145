"""The held-out corpus of issue 29 (``tests/corpus/heldout/``): replies and labelled code
written independently of ``tests/corpus/replies`` and ``tests/corpus/checks``, before
either was read, to measure the verdicts on material their author did not tune to.

The floors are the counts the engine reached when the corpus was recorded (see the
qa29 report); each can fail, and each is raised, never lowered, as the verdicts improve.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cvb_engine.quality import judge_replies, load_corpus, load_replies, measure, overall
from cvb_engine.scenario import load_library
from cvb_engine.scoring import score_code

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "tests" / "corpus" / "heldout"

# Recorded 2026-12-05: 97 of 99 replies agree; 42 violations flagged, 3 false alarms, 1 missed.
# Raised by verdicts (same day): 99 of 99 agree; 43 flagged, 2 false alarms, 0 missed.
# Grown by qa29 and merged (same day): 108 of 108 replies; 61 of 61 flagged, 2 false alarms.
REPLIES_AGREEING = 108
CHECK_FALSE_ALARMS_AT_MOST = 2
CHECK_MISSES_AT_MOST = 0


@pytest.fixture(scope="module")
def library() -> dict:
    return load_library(ROOT / "scenarios")


def test_heldout_replies_agree_with_their_labels(library: dict) -> None:
    judged = judge_replies(load_replies(HELDOUT / "replies"), library)
    assert len(judged) >= 108
    misses = [f"{j.reply.id}: {'; '.join(j.problems)}" for j in judged if not j.agrees]
    assert sum(j.agrees for j in judged) >= REPLIES_AGREEING, "\n".join(misses)
    credited = [
        j.reply.id
        for j in judged
        if j.reply.expect.outcome != "answered" and any(j.honored.values())
    ]
    assert credited == []


def test_heldout_code_keeps_its_precision_and_recall(library: dict) -> None:
    total = overall(measure(load_corpus(HELDOUT / "checks"), library))
    assert total.n >= 116
    assert total.fp <= CHECK_FALSE_ALARMS_AT_MOST, total.false_alarms
    assert total.fn <= CHECK_MISSES_AT_MOST, total.missed


_EXECUTOR_FLUSHER = """
import json
import threading
from concurrent.futures import ThreadPoolExecutor


class MetricsFlusher:
    def __init__(self, snapshot, path, interval=10.0):
        self.snapshot, self.path, self.interval = snapshot, path, interval
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1)

    def _write(self):
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(self.snapshot()) + "\\n")

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._write()

    def start(self):
        self._pool.submit(self._loop)

    def stop(self):
        self._stop.set()
        self._pool.shutdown({how})
        self._write()
"""

_POPEN_ARCHIVE = """
import subprocess


def archive_directory(directory, archive_path):
    proc = subprocess.Popen(["tar", "-czf", archive_path, directory], stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate({first})
    except subprocess.TimeoutExpired:
        {cleanup}
        proc.communicate()
        raise
    if proc.returncode:
        raise RuntimeError(err)
"""


@pytest.mark.parametrize(
    ("scenario", "constraint", "code", "honored"),
    [
        pytest.param(
            "metrics-flusher-thread-shutdown",
            "non-daemon-flusher-threads",
            _EXECUTOR_FLUSHER.format(how=""),
            True,
            id="executor-shutdown-joins-its-workers",
        ),
        pytest.param(
            "metrics-flusher-thread-shutdown",
            "non-daemon-flusher-threads",
            _EXECUTOR_FLUSHER.format(how="wait=True"),
            True,
            id="executor-shutdown-wait-true",
        ),
        pytest.param(
            "metrics-flusher-thread-shutdown",
            "non-daemon-flusher-threads",
            _EXECUTOR_FLUSHER.format(how="wait=False"),
            False,
            id="executor-shutdown-without-waiting",
        ),
        pytest.param(
            "shell-command-runner",
            "subprocess-timeouts",
            _POPEN_ARCHIVE.format(first="timeout=600", cleanup="proc.kill()"),
            True,
            id="communicate-after-kill-collects-output",
        ),
        pytest.param(
            "shell-command-runner",
            "subprocess-timeouts",
            _POPEN_ARCHIVE.format(first="timeout=600", cleanup="proc.terminate()"),
            True,
            id="communicate-after-terminate",
        ),
        pytest.param(
            "shell-command-runner",
            "subprocess-timeouts",
            _POPEN_ARCHIVE.format(first="", cleanup="proc.kill()"),
            False,
            id="first-communicate-unbounded",
        ),
        pytest.param(
            "shell-command-runner",
            "subprocess-timeouts",
            _POPEN_ARCHIVE.format(first="timeout=600", cleanup="pass"),
            False,
            id="communicate-without-kill-unbounded",
        ),
    ],
)
def test_heldout_classes_fixed(
    library: dict, scenario: str, constraint: str, code: str, honored: bool
) -> None:
    scored = score_code(library[scenario].scenario, code)
    verdict = next(c for c in scored.constraints if c.constraint_id == constraint)
    assert verdict.honored is honored, verdict
