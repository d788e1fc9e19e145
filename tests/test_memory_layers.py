"""Memory layers (cvb_engine.memory_layers): the protocol over every transport, faults, bm25.

Real subprocesses (tests/memory_layer_cmd.py, ``python -m cvb_engine.memory_layers.bm25``)
and real HTTP servers on 127.0.0.1 (tests/memory_layer_server.py); no mocks.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from memory_layer_server import MemoryLayerServer

from cvb_engine.memory_layers import (
    MAX_CONTEXT_CHARS,
    MAX_MESSAGES,
    PROTOCOL,
    IngestResult,
    LayerError,
    LayerSpec,
    MemoryEntry,
    QueryResult,
    layer_spec,
    open_layer,
    probe_layer,
)
from cvb_engine.memory_layers import bm25 as bm25_layer
from cvb_engine.memory_layers import builtin as builtin_transport

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CMD_LAYER = [sys.executable, str(HERE / "memory_layer_cmd.py")]
SERVER_SCRIPT = HERE / "memory_layer_server.py"
BM25_COMMAND = shlex.join([sys.executable, "-m", "cvb_engine.memory_layers.bm25"])
KEY = "sk-memlayer-0123456789abcdefXYZ"
KEY_ENV = "CVB_TEST_MEMORY_LAYER_KEY"

ENTRIES = (
    MemoryEntry(
        "http-timeout",
        "HTTP calls: requests.get always passes timeout=10 when fetching a URL.",
        "decision",
    ),
    MemoryEntry(
        "logging",
        "Logs go through structlog with JSON output; print() is for scripts only.",
        "convention",
    ),
    MemoryEntry(
        "db-wal",
        "The SQLite database runs in WAL mode since the March lock-up incident.",
        "incident",
    ),
    MemoryEntry("money", "Prices are stored as integer cents, never as floats.", "decision"),
    MemoryEntry(
        "dates", "Timestamps are timezone-aware UTC datetimes in storage and in APIs.", "convention"
    ),
    MemoryEntry(
        "tests", "Unit tests use pytest fixtures; no unittest.TestCase classes.", "convention"
    ),
)
FETCH_TASK = (
    "Write a Python function fetch_json(url) that downloads a URL and returns the parsed JSON."
)

_T = TypeVar("_T")


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro)


def command_spec(*flags: str, timeout_s: float = 30.0) -> LayerSpec:
    return layer_spec(shlex.join([*CMD_LAYER, *flags]), None, None, None, timeout_s)


async def round_trip(
    spec: LayerSpec,
    state_dir: Path,
    entries: Sequence[MemoryEntry] = ENTRIES,
    task: str = FETCH_TASK,
    k: int = 5,
) -> tuple[IngestResult, QueryResult]:
    async with open_layer(spec, state_dir=state_dir) as layer:
        ingested = await layer.ingest("run-1/memory", entries)
        answer = await layer.query("run-1/memory", task, "library-choice", k)
    return ingested, answer


def failure(spec: LayerSpec, state_dir: Path, **kwargs: Any) -> str:
    """The message of the LayerError a round trip raises."""
    with pytest.raises(LayerError) as caught:
        run(round_trip(spec, state_dir, **kwargs))
    return str(caught.value)


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- choosing a layer


@pytest.mark.parametrize(
    ("args", "transport", "target", "label"),
    [
        ((None, None, None, None), "builtin", "bm25", "bm25"),
        ((None, None, "bm25", None), "builtin", "bm25", "bm25"),
        (("./my_layer.py", None, None, None), "command", "./my_layer.py", "command ./my_layer.py"),
        (("./l.py", None, "bm25", None), "command", "./l.py", "command ./l.py"),
        (
            (None, "http://127.0.0.1:8000/", None, None),
            "http",
            "http://127.0.0.1:8000",
            "http http://127.0.0.1:8000",
        ),
        (
            (None, "https://layer.example/v1", None, "MY_LAYER_KEY"),
            "http",
            "https://layer.example/v1",
            "http https://layer.example/v1",
        ),
    ],
    ids=[
        "default-bm25",
        "named-bm25",
        "command",
        "command-beside-default-layer",
        "url-slash-dropped",
        "url-with-key",
    ],
)
def test_layer_spec_accepts(
    args: tuple[str | None, ...], transport: str, target: str, label: str
) -> None:
    spec = layer_spec(*args, timeout_s=5)
    assert (spec.transport, spec.target, spec.label, spec.timeout_s) == (
        transport,
        target,
        label,
        5.0,
    )


@pytest.mark.parametrize(
    ("args", "timeout_s", "expected"),
    [
        (("./l.py", "http://h:1", None, None), 5, "not several"),
        (("./l.py", None, "faiss", None), 5, "not several"),
        ((None, None, "faiss", None), 5, "unknown built-in memory layer 'faiss'; known: bm25"),
        ((None, "ftp://h/x", None, None), 5, "http:// or https://"),
        ((None, "127.0.0.1:8700", None, None), 5, "http:// or https://"),
        ((None, "http://u:secret@h:1", None, None), 5, "must not hold credentials"),
        ((None, "http://h:1/?a=b", None, None), 5, "query or fragment"),
        (("   ", None, None, None), 5, "command= is empty"),
        (("./l.py 'unclosed", None, None, None), 5, "cannot be split"),
        (("./l.py", None, None, "MY_LAYER_KEY"), 5, "key_env= applies to url= layers only"),
        ((None, None, None, "MY_LAYER_KEY"), 5, "key_env= applies to url= layers only"),
        ((None, "http://h:1", None, "HOME"), 5, "HOME is not declared as a key variable"),
        ((None, "http://h:1", None, "sk-not a name"), 5, "NAME of an environment variable"),
        ((None, None, None, None), 0, "above 0 s"),
        ((None, None, None, None), float("nan"), "a number of seconds"),
    ],
    ids=[
        "command-and-url",
        "command-and-other-builtin",
        "unknown-builtin",
        "ftp-url",
        "no-scheme",
        "credentials-in-url",
        "query-in-url",
        "empty-command",
        "unsplittable-command",
        "key-for-command",
        "key-for-builtin",
        "undeclared-key-variable",
        "key-instead-of-name",
        "zero-timeout",
        "nan-timeout",
    ],
)
def test_layer_spec_refuses(args: tuple[str | None, ...], timeout_s: float, expected: str) -> None:
    with pytest.raises(LayerError, match=re.escape(expected)) as caught:
        layer_spec(*args, timeout_s=timeout_s)
    assert "secret" not in str(caught.value)


def test_open_layer_checks_a_hand_made_spec(tmp_path: Path) -> None:
    with pytest.raises(LayerError, match="http:// or https://"):
        open_layer(LayerSpec("http", "file:///etc/passwd"), state_dir=tmp_path)


# --------------------------------------------------------------------------- command transport


def test_command_context_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    spec = command_spec(
        "--context",
        "use httpx, not requests",
        "--name",
        "fixed",
        "--version",
        "7",
        "--log",
        str(log),
    )
    ingested, answer = run(round_trip(spec, tmp_path / "state"))
    assert (ingested.name, ingested.version, ingested.count) == ("fixed", "7", len(ENTRIES))
    assert answer.context == "use httpx, not requests"
    assert answer.messages is None and answer.entries == []
    assert (answer.name, answer.version) == ("fixed", "7")
    assert answer.latency_s > 0 and ingested.latency_s > 0
    ingest, query = log_lines(log)
    state_dir = str((tmp_path / "state").resolve())
    assert ingest == {
        "protocol": PROTOCOL,
        "op": "ingest",
        "namespace": "run-1/memory",
        "entries": [{"id": e.id, "text": e.text, "kind": e.kind} for e in ENTRIES],
        "state_dir": state_dir,
    }
    assert query == {
        "protocol": PROTOCOL,
        "op": "query",
        "namespace": "run-1/memory",
        "task": FETCH_TASK,
        "category": "library-choice",
        "k": 5,
        "state_dir": state_dir,
    }
    assert (tmp_path / "state").is_dir()


def test_command_messages_and_label_as_name(tmp_path: Path) -> None:
    spec = command_spec("--messages", "--context", "prices are integer cents")
    ingested, answer = run(round_trip(spec, tmp_path))
    assert answer.context is None
    assert answer.messages == [
        {"role": "system", "content": "Project memory follows."},
        {"role": "user", "content": "prices are integer cents"},
    ]
    assert ingested.name == answer.name == spec.label
    assert answer.version is None


def test_command_entries_persist_in_state_dir(tmp_path: Path) -> None:
    spec = command_spec("--echo-entries")
    _, answer = run(round_trip(spec, tmp_path, k=2))
    assert answer.entries == ["http-timeout", "logging"]
    assert answer.context == f"- {ENTRIES[0].text}\n- {ENTRIES[1].text}"
    assert list(tmp_path.glob("echo-*.json"))


def test_a_name_given_at_ingest_only_names_the_queries(tmp_path: Path) -> None:
    reply = json.dumps({"context": "notes"})
    spec = command_spec("--name", "mine", "--version", "3", "--reply", reply, "--fail-on", "query")
    ingested, answer = run(round_trip(spec, tmp_path))
    assert (ingested.name, ingested.version) == (answer.name, answer.version) == ("mine", "3")


def test_unknown_entry_ids_are_dropped(tmp_path: Path) -> None:
    spec = command_spec("--entries", "db-wal,made-up,db-wal,money")
    _, answer = run(round_trip(spec, tmp_path))
    assert answer.entries == ["db-wal", "money"]


def test_ids_count_only_for_the_namespace_they_were_ingested_into(tmp_path: Path) -> None:
    async def go() -> QueryResult:
        async with open_layer(command_spec("--entries", "money"), state_dir=tmp_path) as layer:
            await layer.ingest("a", ENTRIES)
            return await layer.query("b", FETCH_TASK, "x", 3)

    assert run(go()).entries == []


def test_relative_command_resolves_against_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "my_layer.py"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.load(sys.stdin)\n"
        'print(json.dumps({"ok": True, "context": "from my layer"}))\n'
    )
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for command in ("./my_layer.py", "my_layer.py"):
        _, answer = run(round_trip(layer_spec(command, None, None, None, 30), tmp_path / "s"))
        assert answer.context == "from my layer"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ("--exit", "3"),
            "memory layer 'command {cmd}': ingest exited with status 3: "
            "memory_layer_cmd: failing ingest on purpose",
        ),
        (("--exit", "4", "--fail-on", "query"), "query exited with status 4: "),
        (("--bad-json",), "ingest replied with text that is not JSON on stdout (line 1 column 2)"),
        (("--not-object",), "ingest replied with an array, not a JSON object"),
        (("--huge", "--fail-on", "query"), "query wrote more than 4 MiB to stdout"),
        (("--reply", "", "--fail-on", "query"), "query replied with nothing on stdout"),
        (
            ("--reply", '{"ok": false, "error": "disk full"}'),
            'replied "ok": false, not true: disk full',
        ),
        (("--reply", '{"name": "x"}', "--fail-on", "ingest"), 'ingest replied without "ok": true'),
        (("--reply", "{}", "--fail-on", "query"), 'query replied without "context" or "messages"'),
        (
            ("--reply", '{"context": "a", "messages": []}', "--fail-on", "query"),
            'both "context" and "messages"',
        ),
        (
            ("--reply", '{"context": 5}', "--fail-on", "query"),
            '"context" that is not a string (int)',
        ),
        (
            ("--long-context", str(MAX_CONTEXT_CHARS + 1)),
            f"context of {MAX_CONTEXT_CHARS + 1:,} characters (at most {MAX_CONTEXT_CHARS:,})",
        ),
        (
            (
                "--reply",
                json.dumps({"messages": [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)}),
                "--fail-on",
                "query",
            ),
            f"replied with {MAX_MESSAGES + 1} messages (at most {MAX_MESSAGES})",
        ),
        (
            ("--reply", '{"messages": [{"role": "tool", "content": "x"}]}', "--fail-on", "query"),
            'messages[0].role "tool" (expected system, user, assistant)',
        ),
        (
            ("--reply", '{"messages": [{"role": "user", "content": 1}]}', "--fail-on", "query"),
            "messages[0].content that is not a string",
        ),
        (("--reply", '{"messages": {}}', "--fail-on", "query"), '"messages" that is not a list'),
        (
            ("--reply", '{"context": "", "entries": "a"}', "--fail-on", "query"),
            '"entries" that is not a list of ids',
        ),
        (
            ("--reply", "[" * 100_000, "--fail-on", "query"),
            "query replied with JSON nested too deeply on stdout",
        ),
    ],
    ids=[
        "exit-status-with-stderr",
        "exit-on-query-only",
        "bad-json",
        "not-an-object",
        "huge-stdout",
        "empty-stdout",
        "ingest-not-ok",
        "ingest-without-ok",
        "no-context-nor-messages",
        "context-and-messages",
        "context-not-text",
        "context-too-long",
        "too-many-messages",
        "bad-role",
        "content-not-text",
        "messages-not-list",
        "entries-not-list",
        "nested-too-deep",
    ],
)
def test_command_faults(tmp_path: Path, flags: tuple[str, ...], expected: str) -> None:
    spec = command_spec(*flags)
    message = failure(spec, tmp_path)
    assert expected.format(cmd=spec.target) in message, message
    # a long command line is cut in the message
    assert message.startswith(f"memory layer '{spec.label[:150]}")


def test_stderr_tail_is_its_end(tmp_path: Path) -> None:
    message = failure(command_spec("--exit", "1", "--noise", "5000"), tmp_path)
    assert message.endswith("memory_layer_cmd: failing ingest on purpose")
    assert ": …" in message
    assert "noise line 0 " not in message and "noise line 4999 " in message
    assert len(message) < 2_600


def test_names_are_coerced_or_ignored(tmp_path: Path) -> None:
    reply = {"context": "ok", "name": "n\x1b[31m" + "x" * 200, "version": ["not", "text"]}
    spec = command_spec("--reply", json.dumps(reply), "--fail-on", "query")
    _, answer = run(round_trip(spec, tmp_path))
    assert answer.name == "n[31m" + "x" * 75
    assert answer.version is None


def test_command_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    # Longer than the other timeout cases: the layer must get to start its child first.
    spec = command_spec(
        "--spawn-sleeper", "--sleep", "60", "--pid-file", str(pid_file), timeout_s=3.0
    )
    message = failure(spec, tmp_path)
    assert f"memory layer '{spec.label}': ingest timed out after 3.0 s" == message
    pids = dict(line.split() for line in pid_file.read_text().splitlines())
    assert "sleeper" in pids, "the layer did not get to start its child within the timeout"
    for pid in (pids["layer"], pids["sleeper"]):
        assert _gone(int(pid)), f"process {pid} outlived the timeout"


def test_short_timeout_is_a_clear_failure(tmp_path: Path) -> None:
    spec = command_spec("--sleep", "30", "--fail-on", "query", timeout_s=1.0)
    assert failure(spec, tmp_path).endswith("query timed out after 1.0 s")


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Whether ``pid`` has ended (a zombie waiting for init counts as ended)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("./no_such_layer.py", "cannot start './no_such_layer.py': no such file"),
        ("no-such-layer-command-xyz", "no such command on PATH or in"),
        ("./plain.txt", "is not an executable file (chmod +x it"),
    ],
    ids=["missing-path", "missing-on-path", "not-executable"],
)
def test_command_that_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, expected: str
) -> None:
    (tmp_path / "plain.txt").write_text("not a program\n")
    monkeypatch.chdir(tmp_path)
    message = failure(layer_spec(command, None, None, None, 10), tmp_path / "state")
    assert message.startswith(f"memory layer 'command {command}': ingest cannot start")
    assert expected in message


# --------------------------------------------------------------------------- http transport


def http_spec(url: str, key_env: str | None = None, timeout_s: float = 30.0) -> LayerSpec:
    return layer_spec(None, url, None, key_env, timeout_s)


def test_http_context_with_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with MemoryLayerServer(
        context="use httpx", api_key=KEY, name="remote", version="2.1"
    ) as server:
        ingested, answer = run(round_trip(http_spec(server.base_url, KEY_ENV), tmp_path))
        served = server.requests
    assert (ingested.name, answer.name, answer.version, answer.context) == (
        "remote",
        "remote",
        "2.1",
        "use httpx",
    )
    assert [(r.path, r.authorized, r.outcome) for r in served] == [
        ("/ingest", True, "ok"),
        ("/query", True, "ok"),
    ]
    assert served[0].body["entries"][0] == {
        "id": "http-timeout",
        "text": ENTRIES[0].text,
        "kind": "decision",
    }
    assert "state_dir" not in served[0].body and "state_dir" not in served[1].body
    assert served[1].body["k"] == 5


def test_http_messages_and_entries(tmp_path: Path) -> None:
    with MemoryLayerServer(messages=True, context="cents", entries=["money", "ghost"]) as server:
        url = server.base_url
        _, answer = run(round_trip(http_spec(url + "/"), tmp_path))
    assert answer.messages is not None and answer.messages[1]["content"] == "cents"
    assert answer.entries == ["money"]
    assert answer.name == f"http {url}"


@pytest.mark.parametrize(
    ("server_kwargs", "timeout_s", "expected"),
    [
        ({"fault": "500"}, 30.0, 'ingest answered HTTP 500: {"error": "the layer broke"}'),
        ({"fault": "hang", "hang_s": 20}, 0.5, "ingest timed out after 0.5 s"),
        (
            {"fault": "bad_json"},
            30.0,
            "ingest replied with text that is not JSON (line 1 column 2)",
        ),
        ({"fault": "huge"}, 30.0, "ingest replied with a body over 4 MiB"),
        ({"api_key": "sk-other-key-not-sent"}, 30.0, "ingest answered HTTP 401"),
    ],
    ids=["status-500", "hang", "bad-json", "huge-body", "no-key-sent"],
)
def test_http_faults(
    tmp_path: Path, server_kwargs: dict[str, Any], timeout_s: float, expected: str
) -> None:
    with MemoryLayerServer(**server_kwargs) as server:
        url = server.base_url
        spec = http_spec(url, timeout_s=timeout_s)
        message = failure(spec, tmp_path)
    assert message.startswith(f"memory layer 'http {url}': {expected}"), message


@pytest.mark.parametrize(
    ("server_kwargs", "expected"),
    [
        ({"fault": "bad_json", "fail_on": "query"}, "query replied with text that is not JSON"),
        ({"fail_query_status": 503}, "query answered HTTP 503: "),
    ],
    ids=["fault-on-query", "query-status"],
)
def test_http_faults_on_query_only(
    tmp_path: Path, server_kwargs: dict[str, Any], expected: str
) -> None:
    with MemoryLayerServer(**server_kwargs) as server:
        message = failure(http_spec(server.base_url), tmp_path)
        outcomes = [r.outcome for r in server.requests]
    assert expected in message
    assert outcomes[0] == "ok" and len(outcomes) == 2


def test_http_connection_refused(tmp_path: Path) -> None:
    with MemoryLayerServer() as server:
        url = server.base_url
    message = failure(http_spec(url, timeout_s=5), tmp_path)
    assert message.startswith(f"memory layer 'http {url}': ingest cannot connect to {url}")


def test_http_missing_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with MemoryLayerServer(api_key=KEY) as server:
        message = failure(http_spec(server.base_url, KEY_ENV), tmp_path)
        assert server.requests == []
    assert (
        f"ingest cannot read its key: the environment variable {KEY_ENV} (key_env) is not set"
        in message
    )


def test_http_key_never_in_messages_or_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with MemoryLayerServer(fault="echo_key", api_key=KEY) as server:
        message = failure(http_spec(server.base_url, KEY_ENV), tmp_path)
    assert "HTTP 500" in message and "***" in message
    with MemoryLayerServer(context=f"the key is {KEY.upper()}", name=KEY) as server:
        ingested, answer = run(round_trip(http_spec(server.base_url, KEY_ENV), tmp_path))
    assert answer.context == "the key is ***"
    for text in (message, answer.context, answer.name, ingested.name):
        assert KEY.lower() not in text.lower()
        assert KEY[:12] not in text


def test_http_server_as_a_process(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    argv = [sys.executable, str(SERVER_SCRIPT), "--port", "0", "--context", "from a process"]
    with subprocess.Popen([*argv, "--log", str(log)], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.startswith("READY http://127.0.0.1:"), line
            _, answer = run(round_trip(http_spec(line.split()[1]), tmp_path))
            assert answer.context == "from a process"
        finally:
            proc.terminate()
        assert proc.wait(timeout=20) == 0
    assert [r["outcome"] for r in log_lines(log)] == ["ok", "ok"]


# --------------------------------------------------------------------------- builtin bm25

BM25 = layer_spec(None, None, None, None, 60)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fetches the URL and the parsed JSON", ["fetch", "url", "pars", "json"]),
        ("requests.get(url, timeout=10)", ["request", "get", "url", "timeout", "10"]),
        ("fetch_json PARSE parsing", ["fetch", "json", "pars", "pars"]),
        ("a I it is of", []),
    ],
    ids=["stems-and-stopwords", "code-splits", "identifier-and-case", "only-stopwords"],
)
def test_bm25_tokens(text: str, expected: list[str]) -> None:
    assert bm25_layer.tokens(text) == expected


def test_bm25_ranks_the_relevant_entry_first(tmp_path: Path) -> None:
    ingested, answer = run(round_trip(BM25, tmp_path, k=5))
    assert ingested.name == "bm25" and ingested.version == bm25_layer.version()
    assert answer.entries[0] == "http-timeout"
    assert answer.context is not None
    assert answer.context.splitlines()[0] == f"- {ENTRIES[0].text}"
    assert answer.version is not None and answer.version.endswith("+cvb.1")


@pytest.mark.parametrize(
    ("task", "k", "expected"),
    [
        (FETCH_TASK, 1, ["http-timeout"]),
        (FETCH_TASK, 2, ["http-timeout", "logging"]),
        ("Store the order total for the invoice prices.", 5, ["money"]),
        ("Add structlog logging to the importer.", 1, ["logging"]),
        (
            "Add a cache for the SQLite database and log timestamps in tests.",
            3,
            ["db-wal", "dates", "tests"],
        ),
        (
            "Add a cache for the SQLite database and log timestamps in tests.",
            6,
            ["db-wal", "dates", "tests", "logging"],
        ),
    ],
    ids=["fetch-k1", "fetch-k2", "fewer-hits-than-k", "logging-k1", "k3", "k6-only-hits"],
)
def test_bm25_honours_k(tmp_path: Path, task: str, k: int, expected: list[str]) -> None:
    _, answer = run(round_trip(BM25, tmp_path, task=task, k=k))
    assert answer.entries == expected
    by_id = {e.id: e.text for e in ENTRIES}
    assert answer.context == "\n".join(f"- {by_id[i]}" for i in expected)


def test_bm25_no_hits_is_an_empty_context(tmp_path: Path) -> None:
    _, answer = run(round_trip(BM25, tmp_path, task="Rotate the quaternion."))
    assert (answer.context, answer.entries) == ("", [])
    _, answer = run(round_trip(BM25, tmp_path, entries=(), task=FETCH_TASK))
    assert (answer.context, answer.entries) == ("", [])


def test_bm25_as_a_command_round_trips_with_state_dir(tmp_path: Path) -> None:
    spec = layer_spec(BM25_COMMAND, None, None, None, 60)
    state = tmp_path / "bm25-state"
    ingested, answer = run(round_trip(spec, state, k=2))
    _, builtin_answer = run(round_trip(BM25, tmp_path, k=2))
    assert ingested.name == "bm25"
    assert (answer.context, answer.entries) == (builtin_answer.context, builtin_answer.entries)
    assert answer.entries[0] == "http-timeout"
    assert len(list(state.glob("bm25-*.json"))) == 1


def test_bm25_command_refuses_a_query_before_ingest(tmp_path: Path) -> None:
    async def go() -> QueryResult:
        async with open_layer(
            layer_spec(BM25_COMMAND, None, None, None, 60), state_dir=tmp_path
        ) as layer:
            return await layer.query("never-ingested", FETCH_TASK, "x", 3)

    with pytest.raises(LayerError, match=r"exited with status 2: .*nothing was ingested"):
        run(go())


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"protocol": "cvb-memory/0", "op": "query", "namespace": "n"}, "expected protocol"),
        ({"protocol": PROTOCOL, "op": "delete", "namespace": "n"}, "op: expected"),
        (
            {"protocol": PROTOCOL, "op": "ingest", "namespace": "n", "entries": [{"id": 1}]},
            "entries[0]",
        ),
        (
            {"protocol": PROTOCOL, "op": "query", "namespace": "n", "task": "t", "k": 0},
            "k: expected",
        ),
        (
            {"protocol": PROTOCOL, "op": "query", "namespace": "n", "task": "t", "k": 2},
            "nothing was ingested",
        ),
    ],
    ids=["protocol", "op", "entry", "k", "not-ingested"],
)
def test_bm25_handler_refuses_bad_requests(request_: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        bm25_layer.handle(request_, None, {})


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"context": 5}, '"context" that is not a string'),
        ({"context": "x", "entries": {1, 2}}, "not JSON"),
        (ValueError("index broke"), "query failed: ValueError: index broke"),
    ],
    ids=["ill-typed", "not-json", "raises"],
)
def test_builtin_replies_are_validated_like_remote_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: object, expected: str
) -> None:
    def handle(request: dict[str, Any], state_dir: Path | None, memory: dict[str, Any]) -> Any:
        if request["op"] == "ingest":
            return {"ok": True}
        if isinstance(reply, Exception):
            raise reply
        return reply

    builtin_transport.register_layer("broken", "")(handle)
    try:
        message = failure(layer_spec(None, None, "broken", None, 10), tmp_path)
    finally:
        builtin_transport._LAYERS.remove("broken")
    assert message.startswith("memory layer 'broken': query ")
    assert expected in message


# --------------------------------------------------------------------------- probe


def test_probe_builtin_and_command(tmp_path: Path) -> None:
    line = run(probe_layer(BM25, state_dir=tmp_path))
    assert re.fullmatch(
        r"bm25 \S+\+cvb\.1 \(builtin\): ingest \d+ ms, query \d+ ms, \d+ characters of context",
        line,
    ), line
    line = run(probe_layer(command_spec("--messages", "--name", "mine"), state_dir=tmp_path))
    assert re.fullmatch(r"mine \(command\): ingest \d+ ms, query \d+ ms, 2 messages", line), line


def test_probe_fails_clearly(tmp_path: Path) -> None:
    spec = command_spec("--exit", "5", "--fail-on", "query")
    with pytest.raises(LayerError, match=r"query exited with status 5: memory_layer_cmd"):
        run(probe_layer(spec, state_dir=tmp_path))
    with MemoryLayerServer(fault="500") as server, pytest.raises(LayerError, match="HTTP 500"):
        run(probe_layer(http_spec(server.base_url), state_dir=tmp_path))
