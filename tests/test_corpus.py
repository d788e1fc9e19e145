"""The labelled corpora: chat replies judged as a careful human would, and check quality.

Both corpora are written apart from the scenarios' own samples (tests/corpus/).
The floors are the figures measured when they were recorded; a change that
lowers one is a regression in the verdicts (raise them as the verdicts improve).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvb_engine.quality import judge_replies, load_corpus, load_replies, measure, overall
from cvb_engine.scenario import load_library

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
REPLY_AGREEMENT_FLOOR = 0.99


@pytest.fixture(scope="module")
def library() -> dict:
    return load_library(ROOT / "scenarios")


@pytest.fixture(scope="module")
def judged(library: dict) -> list:
    return judge_replies(load_replies(CORPUS / "replies"), library)


def test_the_reply_corpus_covers_the_shapes(judged: list) -> None:
    assert len(judged) >= 248
    outcomes = {j.reply.expect.outcome for j in judged}
    assert outcomes == {"answered", "unparseable", "no-code"}


def test_no_reply_without_code_honors_a_constraint(judged: list) -> None:
    credited = [
        j.reply.id
        for j in judged
        if j.reply.expect.outcome != "answered" and any(j.honored.values())
    ]
    assert credited == []


def test_every_reply_without_code_is_no_code(judged: list) -> None:
    wrong = [
        (j.reply.id, j.outcome)
        for j in judged
        if j.reply.expect.outcome == "no-code" and j.outcome != "no-code"
    ]
    assert wrong == []


def test_reply_verdicts_agree_with_the_labels(judged: list) -> None:
    agree = sum(j.agrees for j in judged) / len(judged)
    misses = [f"{j.reply.id}: {'; '.join(j.problems)}" for j in judged if not j.agrees]
    assert agree >= REPLY_AGREEMENT_FLOOR, "\n".join(misses)


def test_truncation_follows_the_finish_reason(judged: list) -> None:
    assert all(j.truncated == (j.reply.finish_reason == "length") for j in judged)


def test_check_quality_holds_its_recorded_floors(library: dict) -> None:
    floors_path = CORPUS / "checks" / "quality.json"
    if not floors_path.exists():
        pytest.fail(
            "tests/corpus/checks/quality.json is missing: run benchmarks/check_quality.py --record"
        )
    floors = json.loads(floors_path.read_text(encoding="utf-8"))
    results = measure(load_corpus(CORPUS / "checks"), library)
    below = []
    for (sid, cid), c in results.items():
        floor = floors.get(f"{sid}/{cid}")
        if floor is None:
            below.append(f"{sid}/{cid}: no recorded floor")
            continue
        if c.precision < floor["precision"] - 1e-9 or c.recall < floor["recall"] - 1e-9:
            below.append(
                f"{sid}/{cid}: precision {c.precision:.3f} (floor {floor['precision']}), "
                f"recall {c.recall:.3f} (floor {floor['recall']}); missed {c.missed}, "
                f"false alarms {c.false_alarms}"
            )
    total = overall(results)
    assert total.precision >= floors["overall"]["precision"] - 1e-9
    assert total.recall >= floors["overall"]["recall"] - 1e-9
    assert below == []


def test_every_cvb_constraint_has_at_least_8_labelled_samples(library: dict) -> None:
    results = measure(load_corpus(CORPUS / "checks"), library)
    thin = [
        f"{sid}/{c.id}"
        for sid, item in library.items()
        if item.scenario.category != "ivr"
        for c in item.scenario.constraints
        if results.get((sid, c.id)) is None or results[(sid, c.id)].n < 8
    ]
    assert thin == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "scenario: s\nsamples:\n  - id: a\n    constraint: c\n    violates: maybe\n    code: x\n",
            "x.yaml:5: samples[0].violates",
            id="field-with-line",
        ),
        pytest.param("scenario: [unclosed\n", "x.yaml:2: E001 YAML syntax", id="yaml-syntax"),
        pytest.param("scenario: !!python/object:os.system x\n", "x.yaml:1", id="unsafe-tag"),
    ],
)
def test_a_bad_corpus_file_names_its_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    from cvb_engine.quality import CorpusError

    (tmp_path / "x.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_corpus(tmp_path)
