"""Memory notes, the budget cut and delivered flags (cvb_engine.memory_notes), the stale= and
budget= parameters of the incentivized and memory-layer arms, and the superseded-note lint."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cvb_engine.arms import ArmError, build_messages, expand_sweep, parse_arm
from cvb_engine.arms.incentivized import MEMORY_HEADER, memory_of
from cvb_engine.arms.layered import layer_entries
from cvb_engine.lifecycle import sweep_arms
from cvb_engine.lint import lint_paths, lint_text
from cvb_engine.memory_notes import CURRENT_AS_OF, NoteKind, cut, delivered, memory_notes
from cvb_engine.scenario import load_file, load_library, load_text

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "scenarios"
HTTP = SHIPPED / "library-choice" / "http-client-choice.yaml"


@pytest.fixture(scope="module")
def http():
    return load_file(HTTP).scenario


# --------------------------------------------------------------------------- the notes


@pytest.mark.parametrize(
    ("stale", "kinds"),
    [
        (None, ["current", "current"]),
        ("with", ["superseded", "current", "superseded", "current"]),
        ("only", ["superseded", "superseded"]),
    ],
    ids=["default", "with", "only"],
)
def test_notes_per_stale_setting(http, stale, kinds) -> None:
    notes = memory_notes(http, stale=stale)
    assert [n.kind.value for n in notes] == kinds
    assert [n.constraint_id for n in notes] == [
        c.id for c in http.constraints for _ in range(len(kinds) // 2)
    ]
    for note in notes:
        if note.kind == NoteKind.SUPERSEDED:
            # its label is a slug of its own words, never the constraint's id
            assert note.label != note.constraint_id and note.text[:4].isdigit()
        elif stale == "with":
            assert note.text.startswith(f"{CURRENT_AS_OF}: ") and note.label == note.constraint_id


@pytest.mark.parametrize("position", ["start", "middle", "end", "spread"])
def test_a_superseded_note_stays_just_before_its_current_note(http, position) -> None:
    from cvb_engine.arms import ArmContext

    notes = memory_notes(http, load=12, position=position, stale="with", pool=ArmContext().pool)
    assert sum(n.kind == NoteKind.DISTRACTOR for n in notes) == 12
    for i, note in enumerate(notes):
        if note.kind == NoteKind.SUPERSEDED:
            after = notes[i + 1]
            assert after.kind == NoteKind.CURRENT and after.constraint_id == note.constraint_id


def test_a_constraint_without_a_superseded_note_keeps_its_current_note(valid_text: str) -> None:
    scenario = load_text(valid_text, "x.yaml").scenario
    assert all(c.superseded is None for c in scenario.constraints)
    for stale in (None, "with", "only"):
        notes = memory_notes(scenario, stale=stale)
        assert [n.kind for n in notes] == [NoteKind.CURRENT] * len(scenario.constraints)


# --------------------------------------------------------------------------- the cut


@pytest.mark.parametrize(
    ("text", "budget", "kept_text", "kept"),
    [
        ("aaaa\nbbbb\ncccc", None, "aaaa\nbbbb\ncccc", 14),
        ("aaaa\nbbbb\ncccc", 14, "aaaa\nbbbb\ncccc", 14),  # exactly the size: not cut
        ("aaaa\nbbbb\ncccc", 13, "aaaa\nbbbb\n", 10),  # the last line does not fit whole
        ("aaaa\nbbbb\ncccc", 10, "aaaa\nbbbb\n", 10),
        ("aaaa\nbbbb\ncccc", 9, "aaaa\n", 5),  # a line break counts
        ("aaaa\nbbbb\ncccc", 4, "", 0),  # nothing fits: only the marker
        ("éé\nb", 4, "", 0),  # bytes, not characters: "éé\n" is 5 bytes
        ("éé\nb", 5, "éé\n", 5),
    ],
)
def test_the_cut_keeps_whole_lines_within_the_budget(text, budget, kept_text, kept) -> None:
    result = cut(text, budget)
    assert result.kept == kept and result.total == len(text.encode())
    if result.was_cut:
        body, marker = result.text.rsplit("\n", 1) if kept_text else ("", result.text)
        assert (body + "\n" if kept_text else "") == kept_text
        assert marker.startswith("[Cut here:") and f"{budget:,}-byte limit" in marker
        assert f"{len(text.encode()) - kept:,} of {len(text.encode()):,} bytes" in marker
    else:
        assert result.text == text
    assert cut(text, budget) == result  # deterministic


@pytest.mark.parametrize(
    ("spans", "kept", "expected"),
    [
        ([(0, 4), (5, 9), (10, 14)], 14, [True, True, True]),
        ([(0, 4), (5, 9), (10, 14)], 10, [True, True, False]),
        ([(0, 4), (5, 9), (10, 14)], 5, [True, False, False]),
        ([(0, 4), (5, 9), (10, 14)], 0, [False, False, False]),
    ],
)
def test_delivered_means_entirely_before_the_cut(spans, kept, expected) -> None:
    text = "aaaa\nbbbb\ncccc"
    assert delivered(spans, cut(text, kept if kept < 14 else None)) == expected


def _hand_made(tmp_path: Path, lengths: list[int]) -> object:
    """A scenario whose constraint texts have the given lengths (x-padded)."""
    lines = [
        "id: hand-made",
        "version: 1",
        "category: library-choice",
        "title: Hand made",
        "task: |",
        "  Write a function f() that returns one.",
        "constraints:",
    ]
    for i, n in enumerate(lengths):
        word = "The team keeps note number " + str(i) + " "
        lines += [
            f"  - id: c{i}",
            f"    text: {word + 'x' * (n - len(word))}",
            f"    superseded: '2021-0{i + 1}: Earlier practice number {i} of the team.'",
            "    checks: [{kind: regex, require: 'one'}]",
            "    samples: {violating: ['two'], compliant: ['one']}",
        ]
    return load_text("\n".join(lines) + "\n", tmp_path / "hand-made.yaml").scenario


# The memory block is the header and a blank line, then one line per note,
# "- Decision n (cid): text": 19 bytes before a 100-byte text, so each note line is 119 bytes,
# 120 with its line break; a line is kept when it fits with its break.
HEAD = len(MEMORY_HEADER.encode()) + 2


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (None, [True, True, True]),
        (HEAD + 120 * 3, [True, True, True]),
        (HEAD + 120 * 3 - 2, [True, True, False]),  # the last line's break does not fit
        (HEAD + 120 * 2, [True, True, False]),
        (HEAD + 120 * 2 - 1, [True, False, False]),
        (HEAD + 120, [True, False, False]),
        (HEAD + 119, [False, False, False]),
        (10, [False, False, False]),
    ],
)
def test_delivered_flags_against_a_hand_made_memory(tmp_path: Path, budget, expected) -> None:
    scenario = _hand_made(tmp_path, [100, 100, 100])
    arm = "incentivized" + (f"@budget={budget}" if budget else "@stale=with")
    if budget is None:  # no budget: every note delivered, stale=with to get a record
        info = parse_arm(arm).memory(scenario)
        assert info is not None
        assert [d["delivered"] for d in info["constraints"].values()] == expected
        return
    variant = parse_arm(arm)
    info = variant.memory(scenario)
    assert info is not None
    assert [d["delivered"] for d in info["constraints"].values()] == expected
    assert all(d["superseded_delivered"] is None for d in info["constraints"].values())
    user = build_messages(scenario, arm)[1]["content"]
    for c, got in zip(scenario.constraints, expected, strict=True):
        assert (c.text in user) == got  # a note is in the prompt whole exactly when delivered
    assert info["cut"] == (not all(expected))


@pytest.mark.parametrize("channel", ["inline", "system", "file"])
def test_a_budget_larger_than_the_memory_changes_no_byte(http, channel) -> None:
    base = f"incentivized@channel={channel},load=20"
    assert build_messages(http, base + ",budget=1000000") == build_messages(http, base)


@pytest.mark.parametrize("channel", ["inline", "system", "file"])
def test_the_cut_memory_ends_with_the_marker_before_the_task(http, channel) -> None:
    msgs = build_messages(http, f"incentivized@channel={channel},load=20,budget=1500")
    memory = msgs[0]["content"] if channel == "system" else msgs[1]["content"]
    assert "[Cut here: the remaining" in memory and "(1,500-byte limit)" in memory
    assert msgs[-1]["content"].rstrip().endswith(http.task.strip()[-40:])
    info = parse_arm(f"incentivized@channel={channel},load=20,budget=1500").memory(http)
    assert info is not None and info["cut"] and info["kept_bytes"] <= 1500


def test_budget_is_refused_for_the_history_channel() -> None:
    with pytest.raises(ArmError, match="not to history"):
        parse_arm("incentivized@channel=history,budget=500")


def test_default_variants_store_no_memory_record(http) -> None:
    for arm in ("incentivized", "incentivized@load=10,channel=file", "cold", "mandated"):
        assert parse_arm(arm).memory(http) is None


def test_none_names_the_default_so_a_sweep_can_include_it() -> None:
    assert expand_sweep(["stale=none,with,only", "budget=none,800"]) == [
        "incentivized",
        "incentivized@budget=800",
        "incentivized@stale=with",
        "incentivized@stale=with,budget=800",
        "incentivized@stale=only",
        "incentivized@stale=only,budget=800",
    ]


def test_sweep_arms_gives_each_channel_the_axes_that_apply() -> None:
    arms = sweep_arms([], [], ["inline", "history"], budgets=[None, 500], turns=[0, 4])
    assert arms == [
        "incentivized",
        "incentivized@budget=500",
        "incentivized@channel=history,turns=0",
        "incentivized@channel=history,turns=4",
    ]
    assert sweep_arms([], [], ["inline"]) == []  # nothing chosen: no variant


def test_memory_of_is_the_record_the_arm_stores(http) -> None:
    from cvb_engine.arms import ArmContext
    from cvb_engine.arms.incentivized import Params

    info = memory_of(http, Params(stale="only"), ArmContext())
    assert info is not None and info["stale"] == "only" and not info["cut"]
    assert all(
        d == {"delivered": False, "superseded_delivered": True}
        for d in info["constraints"].values()
    )


# --------------------------------------------------------------------------- memory layers


def test_a_layer_ingests_the_superseded_entries_beside_or_instead(http) -> None:
    plain, owner = layer_entries([http], 0, ())
    with_, owner_with = layer_entries([http], 0, (), "with")
    only, owner_only = layer_entries([http], 0, (), "only")
    n = len(http.constraints)
    assert (len(plain), len(with_), len(only)) == (n, 2 * n, n)
    assert len(owner) == len(owner_with) == n and owner_only == {}  # superseded hold nothing
    olds = {" ".join(c.superseded.split()) for c in http.constraints}
    assert {e.text for e in only} == olds
    assert olds < {e.text for e in with_}
    assert all(e.text.startswith(CURRENT_AS_OF) for e in with_ if e.id in owner_with)


# --------------------------------------------------------------------------- the shipped notes


def test_every_shipped_constraint_has_a_dated_superseded_note() -> None:
    library = load_library(SHIPPED)
    cvb = [item for item in library.values() if item.scenario.category != "ivr"]
    assert len(cvb) == 35
    texts = set()
    for item in cvb:
        for c in item.scenario.constraints:
            assert c.superseded, f"{item.scenario.id}/{c.id}"
            assert c.superseded[:7] < CURRENT_AS_OF
            texts.add(c.superseded)
    assert len(texts) == sum(len(i.scenario.constraints) for i in cvb)  # each its own


def test_the_scenario_hash_leaves_the_superseded_notes_out() -> None:
    raw = HTTP.read_bytes()
    without = b"\n".join(
        line for i, line in enumerate(raw.split(b"\n")) if not _in_superseded(raw.split(b"\n"), i)
    )
    assert load_file(HTTP).sha256 == hashlib.sha256(without).hexdigest()
    assert load_text(without, HTTP).sha256 == hashlib.sha256(without).hexdigest()
    # the note's text is still the scenario's: a change to it shows in the matrix instead
    edited = raw.replace(b"2022-06: The services", b"2022-07: The services")
    assert load_text(edited, HTTP).sha256 == load_file(HTTP).sha256
    assert load_text(raw.replace(b"httpx in 2023", b"httpx in 2022"), HTTP).sha256 != (
        load_file(HTTP).sha256
    )


def _in_superseded(rows: list[bytes], i: int) -> bool:
    for j in range(i, -1, -1):
        stripped = rows[j].lstrip()
        if stripped.startswith(b"superseded:"):
            return j == i or rows[i].startswith(b"      ")
        if j < i and len(rows[j]) - len(stripped) <= 4 and stripped:
            return False
    return False


# --------------------------------------------------------------------------- lint


ANCHOR = "socket-exhaustion incident.\n"
LINT_CASES = [
    ("2022-05: The team called requests directly.", []),
    ("2022-05: Every service must use requests.", ["E024"]),
    ("The services used requests for every call.", ["E026"]),
    ("2026-03: The services used requests for every call.", ["E026"]),
    (
        "2022-05: The team standardized on httpx after requests caused the March "
        "socket-exhaustion incident.",
        ["E025"],
    ),
]


@pytest.mark.parametrize(
    ("note", "codes"), LINT_CASES, ids=["clean", "E024", "undated", "late", "E025"]
)
def test_superseded_note_lint(tmp_path: Path, valid_text: str, note: str, codes) -> None:
    assert ANCHOR in valid_text
    text = valid_text.replace(ANCHOR, ANCHOR + f"    superseded: '{note}'\n", 1)
    item, findings = lint_text(text, tmp_path / "http-client-choice.yaml")
    assert item is not None and item.scenario.constraints[0].superseded == note
    line = item.line_of("constraints", 0, "superseded")
    got = sorted(f.code for f in findings if f.code in ("E024", "E025", "E026"))
    assert got == codes
    assert all(f.line == line for f in findings if f.code in codes)
    # the other constraint has no note yet: a warning while authoring
    assert [f.severity for f in findings if f.code == "E027"] == ["warning"]


def test_a_missing_note_is_an_error_in_the_shipped_library_and_a_warning_elsewhere(
    tmp_path: Path, valid_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cvb_engine import lint

    _, findings = lint_text(valid_text, tmp_path / "http-client-choice.yaml")
    assert {(f.code, f.severity) for f in findings if f.code == "E027"} == {("E027", "warning")}
    folder = tmp_path / "lib" / "library-choice"
    folder.mkdir(parents=True)
    (folder / "http-client-choice.yaml").write_text(valid_text)
    # a team's own folder, linted as a set: still a warning
    own = [f for f in lint_paths([tmp_path / "lib"]) if f.code == "E027"]
    assert own and all(f.severity == "warning" for f in own)
    # the shipped library: an error
    monkeypatch.setattr(lint, "SHIPPED_LIBRARY", tmp_path / "lib")
    shipped = [f for f in lint_paths([tmp_path / "lib"]) if f.code == "E027"]
    assert shipped and all(f.severity == "error" for f in shipped)


def test_the_shipped_library_lints_clean_of_superseded_findings() -> None:
    findings = [f for f in lint_paths([SHIPPED]) if f.code in ("E024", "E025", "E026", "E027")]
    assert findings == []


# --------------------------------------------------------------------------- the whole library

LIBRARY_ARMS = [
    "incentivized@stale=with",
    "incentivized@stale=only",
    "incentivized@channel=history,stale=with",
    *(
        f"incentivized@load={load},channel={channel}{stale},budget={budget}"
        for load in (0, 25)
        for channel in ("inline", "system", "file")
        for stale in ("", ",stale=with", ",stale=only")
        for budget in (200, 700, 1500, 4000)
    ),
]


def test_delivered_flags_match_the_prompt_for_every_shipped_scenario() -> None:
    """Over the shipped library (75 constraints with real texts and notes) and 75 variants:
    a note is flagged delivered exactly when its whole text is in what the model is sent,
    and a note that is not delivered leaves no line of it behind."""
    from cvb_engine.arms import ArmContext

    context = ArmContext()
    library = load_library(SHIPPED)
    n_true = n_false = 0
    for item in library.values():
        scenario = item.scenario
        if scenario.category == "ivr":
            continue
        for arm in LIBRARY_ARMS:
            variant = parse_arm(arm)
            sent = " ".join(
                " ".join(m["content"].split()) for m in build_messages(scenario, arm, context)
            )
            info = variant.memory(scenario, context)
            assert info is not None
            for c in scenario.constraints:
                flags = info["constraints"][c.id]
                current = " ".join(c.text.split())
                old = " ".join((c.superseded or "").split())
                assert flags["delivered"] == (current in sent), (scenario.id, arm, c.id)
                if flags["superseded_delivered"] is None:
                    assert old not in sent
                else:
                    assert flags["superseded_delivered"] == (old in sent)
                n_true += flags["delivered"]
                n_false += not flags["delivered"]
            if info["cut"]:
                assert "[Cut here: the remaining" in sent and info["kept_bytes"] <= info["budget"]
    assert n_true > 1000 and n_false > 1000  # both sides well covered
