"""Every byte an endpoint sends is untrusted.

The real runner (``cvb run``, in-process) and its real recorder process talk
HTTP to ``tests/hostile_openai.py`` on 127.0.0.1, on SQLite and PostgreSQL.
Each model of that server is one hostile case; the run must give every cell a
record, keep the key out of every stored string, cut what is too long, and
resume to ``finished``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.pool import NullPool

from cvb_engine import cli
from cvb_engine.scenario import ARMS
from cvb_engine.store import dispose_engines

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from hostile_openai import CASES, FATAL, HostileOpenAI  # noqa: E402

KEY_VAR = "CVB_TEST_HOSTILE_KEY"
KEY = "sk-cvbtest-Hostile7Canary-5d2c9e81f0"
CUT_AT = 50_000
COMPLIANT = (
    "```python\nimport httpx\n\n\ndef fetch_json(url):\n"
    "    return httpx.get(url, timeout=5).json()\n```"
)
RUN_CASES = [c for c in CASES if c not in FATAL]

#: case → (status, what the error says, or for an ok record what its response holds)
EXPECTED: dict[str, tuple[str, str]] = {
    "list-content": ("ok", COMPLIANT),
    "number-content": ("error", "content is a number, not text"),
    "object-content": ("error", "content is an object, not text"),
    "part-not-object": ("error", "content part 0 is a string, not an object"),
    "choices-object": ("error", "choices is an object, not a list"),
    "choices-string": ("error", "choices is a string, not a list"),
    "empty-choices": ("error", "the reply has no choices"),
    "choice-number": ("error", "choices[0] is a number, not an object"),
    "null-message": ("error", "the reply has empty content"),
    "not-an-object": ("error", "the reply is a list, not an object"),
    "deep-nesting": ("error", "JSON nested too deeply"),
    "deep-content": ("error", "JSON nested too deeply"),
    "lone-surrogate": ("ok", "# \ufffd end"),
    "nul-byte": ("ok", "# ab"),
    "nul-in-finish": ("ok", COMPLIANT),
    "invalid-utf8": ("ok", "# \ufffd\ufffd"),
    "usage-negative": ("ok", COMPLIANT),
    "usage-wrong-type": ("ok", COMPLIANT),
    "usage-not-object": ("ok", COMPLIANT),
    "finish-number": ("error", "finish_reason is a number, not text"),
    "finish-object": ("error", "finish_reason is an object, not text"),
    "key-in-finish": ("ok", COMPLIANT),
    "key-in-content": ("ok", "# *** *** *** *** [***] ***"),
    "key-in-reasoning": ("ok", COMPLIANT),
    "key-split-by-nul": ("ok", "# ***"),
    "key-in-400": ("error", "HTTP 400"),
    "key-in-500": ("error", "HTTP 500"),
    "key-in-html-502": ("error", "HTTP 502"),
    "huge": ("ok", COMPLIANT),
    "gzip-huge": ("ok", COMPLIANT),
    "huge-error": ("error", "HTTP 500"),
    "malformed-json": ("error", "malformed response body"),
    "html-200": ("error", "malformed response body"),
    "empty-body": ("error", "malformed response body"),
}


def test_every_case_has_an_expectation() -> None:
    assert set(EXPECTED) == set(RUN_CASES)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CVB_ENDPOINTS", str(tmp_path / "no-endpoints.json"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("CVB_DATABASE_URL", raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture
def scenarios(tmp_path: Path, valid_text: str) -> Path:
    root = tmp_path / "scenarios" / "library-choice"
    root.mkdir(parents=True)
    (root / "http-client-choice.yaml").write_text(valid_text, encoding="utf-8")
    return tmp_path / "scenarios"


def query(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sqlalchemy.text(sql), params)]
    finally:
        engine.dispose()


def by_model(url: str) -> dict[str, dict[str, Any]]:
    cols = ["model", "status", "error", "response", "reasoning", "finish_reason"]
    cols += ["prompt_tokens", "completion_tokens", "response_cut", "attempts"]
    rows = query(url, f"SELECT {', '.join(cols)} FROM record WHERE run_id = 'h'")
    assert len(rows) == len({r[0] for r in rows}), "a cell stored twice"
    return {r[0]: dict(zip(cols, r, strict=True)) for r in rows}


def key_fragments(text: str) -> list[str]:
    """Every run of 12+ characters of the key in ``text``, in any casing."""
    low, key = text.lower(), KEY.lower()
    return [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in low]


def assert_key_stored_nowhere(url: str) -> None:
    """Grep every text column of every table of the store for the key."""
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        inspector = sqlalchemy.inspect(engine)
        with engine.connect() as conn:
            for table in inspector.get_table_names():
                for column in inspector.get_columns(table):
                    if not isinstance(column["type"], sqlalchemy.String | sqlalchemy.Text):
                        continue
                    name = column["name"]
                    for (value,) in conn.execute(
                        sqlalchemy.text(f'SELECT "{name}" FROM "{table}"')
                    ):
                        if value is not None:
                            assert not key_fragments(str(value)), (table, name, value[:200])
    finally:
        engine.dispose()


def cvb_run(base_url: str, scenarios: Path, db: str, models: list[str], *extra: str) -> int:
    argv = ["--scenarios", str(scenarios), "--base-url", base_url, "--api-key-env", KEY_VAR]
    argv += ["--db", db, "--models", ",".join(models), "--runs", "1", "--arms", "cold"]
    argv += ["--run-id", "h", "--quiet", "--max-attempts", "1", "--timeout", "30"]
    argv += ["--max-response-chars", str(CUT_AT), *extra]
    return cli.main(["run", *argv])


def test_hostile_replies_each_become_a_record_and_the_run_resumes_to_finished(
    scenarios: Path, db_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert ARMS[0] == "cold"
    exported = tmp_path / "results.json"
    with HostileOpenAI(key=KEY, answer=COMPLIANT) as server:
        argv = ("--concurrency", "4", "--json", str(exported))
        assert cvb_run(server.base_url, scenarios, db_url, RUN_CASES, *argv) == 0
        out = capsys.readouterr()
        assert "run h: finished" in out.out, out
        assert query(db_url, "SELECT status FROM run WHERE id = 'h'") == [("finished",)]
        recs = by_model(db_url)
        assert set(recs) == set(RUN_CASES)  # every cell has a record
        for case, (status, needle) in EXPECTED.items():
            rec = recs[case]
            assert rec["status"] == status, (case, rec["error"])
            assert needle in (rec["error"] if status == "error" else rec["response"]), (case, rec)
        # what was cut says so, and nothing else does
        for case in ("huge", "gzip-huge"):
            assert recs[case]["response_cut"] and len(recs[case]["response"]) == CUT_AT
        assert sorted(c for c, r in recs.items() if r["response_cut"]) == ["gzip-huge", "huge"]
        assert len(recs["huge-error"]["error"]) < 2_100
        # usage that is not a count is no count; the answer stays
        for case in ("usage-negative", "usage-wrong-type", "usage-not-object"):
            assert (recs[case]["prompt_tokens"], recs[case]["completion_tokens"]) == (None, None)
        assert recs["list-content"]["prompt_tokens"] == 10
        assert recs["key-in-finish"]["finish_reason"] == "***"
        assert recs["nul-in-finish"]["finish_reason"] == "stop"
        assert "***" in recs["key-in-reasoning"]["reasoning"]
        assert_key_stored_nowhere(db_url)
        assert not key_fragments(out.out + out.err)
        results = exported.read_text(encoding="utf-8")
        assert not key_fragments(results)
        cut = {r["model"]: r["response_cut"] for r in json.loads(results)["records"]}
        assert cut["huge"] is True and cut["list-content"] is False

        # A kill lost some cells (their records are gone): --retry-errors sends only the
        # errors, so the run is not finished...
        lost = ["list-content", "nul-byte", "huge"]
        names = ", ".join(f"'{m}'" for m in lost)
        engine = sqlalchemy.create_engine(db_url, poolclass=NullPool)
        with engine.begin() as conn:
            conn.execute(
                sqlalchemy.text(
                    "DELETE FROM checkoutcome WHERE record_id IN "
                    f"(SELECT id FROM record WHERE model IN ({names}))"
                )
            )
            conn.execute(
                sqlalchemy.text(
                    "DELETE FROM constraintresult WHERE record_id IN "
                    f"(SELECT id FROM record WHERE model IN ({names}))"
                )
            )
            conn.execute(sqlalchemy.text(f"DELETE FROM record WHERE model IN ({names})"))
        engine.dispose()
        errors = sorted(c for c, (s, _) in EXPECTED.items() if s == "error")
        server.order.clear()
        assert cvb_run(server.base_url, scenarios, db_url, RUN_CASES, "--retry-errors") == 1
        assert "run h: incomplete" in capsys.readouterr().out
        assert sorted(server.order) == errors
        assert query(db_url, "SELECT status FROM run WHERE id = 'h'") == [("incomplete",)]

        # ...and a plain resume sends the missing cells first, then the errors again:
        # cells that keep failing still get their record, and the run is finished.
        server.order.clear()
        argv = ("--concurrency", "1")
        assert cvb_run(server.base_url, scenarios, db_url, RUN_CASES, *argv) == 0
        assert "run h: finished" in capsys.readouterr().out
        assert sorted(server.order[: len(lost)]) == sorted(lost)
        assert sorted(server.order[len(lost) :]) == errors
        assert set(by_model(db_url)) == set(RUN_CASES)

        # Once the endpoint behaves, a resume makes every record an answer.
        server.healthy = True
        assert cvb_run(server.base_url, scenarios, db_url, RUN_CASES, "--concurrency", "4") == 0
        assert "run h: finished" in capsys.readouterr().out
        recs = by_model(db_url)
        assert set(recs) == set(RUN_CASES)
        assert all(r["status"] == "ok" for r in recs.values())
        assert all(recs[c]["response"] == COMPLIANT and not recs[c]["response_cut"] for c in errors)
    assert_key_stored_nowhere(db_url)
    dispose_engines()


def test_a_key_echoed_by_a_401_or_the_catalog_is_never_shown(
    scenarios: Path, sqlite_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    leaky = (f"model-{KEY}", f"MODEL-{KEY.upper()}", f"m-{KEY[2:16]}")
    with HostileOpenAI(key=KEY, answer=COMPLIANT, extra_models=leaky) as server:
        # the key refused, the refusal echoing it: the run stops, the message is scrubbed
        assert cvb_run(server.base_url, scenarios, sqlite_db, ["key-in-401"]) == 2
        refused = capsys.readouterr()
        assert "refused the API key (HTTP 401)" in refused.err, refused
        # a model the catalog lacks: the message lists the catalog, scrubbed
        assert cvb_run(server.base_url, scenarios, sqlite_db, ["no-such-model"]) == 2
        unknown = capsys.readouterr()
        assert "not offered" in unknown.err and "model-***" in unknown.err, unknown
    for text in (refused.out, refused.err, unknown.out, unknown.err):
        assert not key_fragments(text), text
    assert_key_stored_nowhere(sqlite_db)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Any:
    yield f"sqlite:///{tmp_path / 'cvb.db'}"
    dispose_engines()
