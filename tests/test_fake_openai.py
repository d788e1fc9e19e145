"""Tests for tests/fake_openai.py, driven through the real ``openai.OpenAI`` client."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai import (
    CHAT_PATH,
    FakeOpenAI,
    FaultKind,
    FaultPlan,
    ServedRequest,
    default_reply,
    messages_sha256,
    replies_from_mapping,
)

FAKE_SCRIPT = Path(__file__).resolve().parent / "fake_openai.py"
MESSAGES: list[Any] = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "Write hello world."},
]


@contextmanager
def client_for(
    server: FakeOpenAI, *, api_key: str = "sk-test", max_retries: int = 0, timeout: float = 5.0
) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=server.base_url,
        api_key=api_key,
        max_retries=max_retries,
        timeout=timeout,
        http_client=openai.DefaultHttpxClient(trust_env=False),  # no proxy for 127.0.0.1
    ) as client:
        yield client


def chat(client: openai.OpenAI, model: str = "m-a", messages: list[Any] | None = None) -> Any:
    return client.chat.completions.create(model=model, messages=messages or MESSAGES)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["m-a", "m-b"]) as srv:
        yield srv


# -- basics ---------------------------------------------------------------------------------


def test_models_list(server: FakeOpenAI) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    with client_for(server) as client:
        models = client.models.list()
        assert [m.id for m in models] == ["m-a", "m-b"]
        assert all(m.owned_by == "fake" and m.object == "model" for m in models)
        assert client.models.retrieve("m-b").id == "m-b"
    assert [e.path for e in server.log] == ["/v1/models", "/v1/models/m-b"]


def test_completion_default_reply(server: FakeOpenAI) -> None:
    with client_for(server) as client:
        first = chat(client, "m-b")
        second = chat(client, "m-b")
    assert first.object == "chat.completion"
    assert first.model == "m-b"
    choice = first.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    content = choice.message.content
    assert content is not None
    assert content.startswith("```python\n# reply to m-b\n")
    assert content.endswith("```")
    assert content == second.choices[0].message.content  # deterministic in the request
    assert content == default_reply({"model": "m-b", "messages": MESSAGES})
    assert first.usage is not None
    assert first.usage.prompt_tokens > 0
    assert first.usage.completion_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

    log = server.log
    assert len(log) == 2
    entry = log[0]
    assert isinstance(entry, ServedRequest)
    assert (entry.path, entry.model, entry.outcome) == (CHAT_PATH, "m-b", "ok")
    assert entry.messages_sha256 == messages_sha256(MESSAGES)
    assert abs(entry.t - time.time()) < 60
    assert server.counts() == {("m-b", "ok"): 2}


def test_reply_callable_string_and_dict() -> None:
    def reply(request: dict[str, Any]) -> str | dict[str, Any]:
        if request["model"] == "raw":
            return {
                "id": "chatcmpl-custom",
                "object": "chat.completion",
                "created": 1,
                "model": "raw",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "custom body"},
                        "finish_reason": "stop",
                    }
                ],
            }
        return f"{request['model']} got {len(request['messages'])} messages"

    with FakeOpenAI(models=["m-a", "raw"], reply=reply) as srv, client_for(srv) as client:
        assert chat(client, "m-a").choices[0].message.content == "m-a got 2 messages"
        raw = chat(client, "raw")
        assert raw.id == "chatcmpl-custom"
        assert raw.choices[0].message.content == "custom body"
        assert raw.usage is None


def test_replies_from_mapping() -> None:
    reply = replies_from_mapping({"fizz": "```python\nfizz()\n```", "hello": "HELLO"})
    with FakeOpenAI(models=["m-a"], reply=reply) as srv, client_for(srv) as client:
        assert chat(client).choices[0].message.content == "HELLO"
        fizz = [{"role": "user", "content": "hello fizzbuzz"}]  # first key in order wins
        assert chat(client, messages=fizz).choices[0].message.content == "```python\nfizz()\n```"
        other = [{"role": "user", "content": "something else"}]
        assert chat(client, messages=other).choices[0].message.content == default_reply(
            {"model": "m-a", "messages": other}
        )


def test_max_tokens_truncates_with_length(server: FakeOpenAI) -> None:
    with client_for(server) as client:
        resp = client.chat.completions.create(model="m-a", messages=MESSAGES, max_tokens=3)
    assert resp.choices[0].finish_reason == "length"
    assert (
        resp.choices[0].message.content
        == default_reply({"model": "m-a", "messages": MESSAGES})[:12]
    )


def test_unknown_model_is_404(server: FakeOpenAI) -> None:
    with client_for(server) as client, pytest.raises(openai.NotFoundError) as info:
        chat(client, "nope")
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"
    assert info.value.type == "invalid_request_error"
    assert "The model `nope` does not exist" in info.value.message
    assert server.counts() == {("nope", "model_not_found"): 1}


def test_api_key_is_checked() -> None:
    with FakeOpenAI(models=["m-a"], api_key="sk-test") as srv:
        with client_for(srv, api_key="sk-wrong") as client:
            with pytest.raises(openai.AuthenticationError) as info:
                chat(client)
            assert info.value.status_code == 401
            assert info.value.code == "invalid_api_key"
            with pytest.raises(openai.AuthenticationError):
                client.models.list()
        with client_for(srv, api_key="sk-test") as client:
            assert chat(client).choices[0].finish_reason == "stop"
        assert srv.counts() == {("m-a", "unauthorized"): 1, ("m-a", "ok"): 1}


# -- faults as the client sees them ----------------------------------------------------------


def _expect_raises(kind: FaultKind, exc_type: type[BaseException]) -> None:
    plan = FaultPlan(script=[kind], retry_after="0.1", hang_s=30)
    with FakeOpenAI(models=["m-a"], faults=plan) as srv:
        with client_for(srv, timeout=0.5) as client, pytest.raises(exc_type) as info:
            chat(client)
        if kind == "429":
            assert isinstance(info.value, openai.RateLimitError)
            assert info.value.response.headers["retry-after"] == "0.1"
            assert info.value.code == "rate_limit_exceeded"
        if isinstance(info.value, openai.APIStatusError) and kind != "429":
            assert info.value.status_code == int(kind)
        started = time.monotonic()
    assert time.monotonic() - started < 1.0  # stop() is prompt, even with a hung request
    assert srv.counts() == {("m-a", kind): 1}


@pytest.mark.parametrize(
    ("kind", "exc_type"),
    [
        ("429", openai.RateLimitError),
        ("500", openai.InternalServerError),
        ("503", openai.InternalServerError),
        ("timeout", openai.APITimeoutError),
        ("drop", openai.APIConnectionError),
        ("malformed", json.JSONDecodeError),  # openai 3.x lets the decode error through
    ],
)
def test_failing_fault_kinds(kind: FaultKind, exc_type: type[BaseException]) -> None:
    _expect_raises(kind, exc_type)


def test_drop_is_not_a_timeout() -> None:
    plan = FaultPlan(script=["drop"])
    with (
        FakeOpenAI(models=["m-a"], faults=plan) as srv,
        client_for(srv) as client,
        pytest.raises(openai.APIConnectionError) as info,
    ):
        chat(client)
    assert not isinstance(info.value, openai.APITimeoutError)


def test_successful_but_bad_fault_kinds() -> None:
    plan = FaultPlan(script=["empty", "no_choices", "length", "ok"])
    with FakeOpenAI(models=["m-a"], faults=plan) as srv, client_for(srv) as client:
        empty = chat(client)
        assert empty.choices[0].message.content == ""
        assert empty.choices[0].finish_reason == "stop"

        no_choices = chat(client)
        assert no_choices.choices == []

        length = chat(client)
        assert length.choices[0].finish_reason == "length"
        truncated = length.choices[0].message.content
        assert truncated is not None
        assert truncated.startswith("```python")
        assert truncated.count("```") == 1  # the code block is never closed

        assert chat(client).choices[0].finish_reason == "stop"
    assert [e.outcome for e in srv.log] == ["empty", "no_choices", "length", "ok"]


def test_script_is_consumed_in_order_then_ok() -> None:
    plan = FaultPlan(script=["429", "ok", "500"], retry_after="0.1")
    outcomes: list[str] = []
    with FakeOpenAI(models=["m-a"], faults=plan) as srv, client_for(srv) as client:
        for _ in range(4):
            try:
                chat(client)
                outcomes.append("ok")
            except openai.APIStatusError as exc:
                outcomes.append(str(exc.status_code))
    assert outcomes == ["429", "ok", "500", "ok"]
    assert [e.outcome for e in srv.log] == outcomes


def test_first_attempts_prove_client_retries() -> None:
    plan = FaultPlan(first_attempts=["429", "429"], retry_after="0.1")
    with FakeOpenAI(models=["m-a", "m-b"], faults=plan) as srv:
        with client_for(srv, max_retries=2) as client:
            assert chat(client, "m-a").choices[0].finish_reason == "stop"
            assert chat(client, "m-b").choices[0].finish_reason == "stop"
            assert chat(client, "m-a").choices[0].finish_reason == "stop"  # already retried
        with client_for(srv, max_retries=0) as client, pytest.raises(openai.RateLimitError):
            chat(client, "m-a", [{"role": "user", "content": "a new request"}])
    assert srv.counts() == {
        ("m-a", "429"): 3,
        ("m-a", "ok"): 2,
        ("m-b", "429"): 2,
        ("m-b", "ok"): 1,
    }


def test_per_request_script_targets_one_request() -> None:
    target = [{"role": "user", "content": "flaky"}]
    plan = FaultPlan(per_request={("m-a", messages_sha256(target)): ["503"]})
    with FakeOpenAI(models=["m-a"], faults=plan) as srv, client_for(srv) as client:
        assert chat(client).choices[0].finish_reason == "stop"
        with pytest.raises(openai.InternalServerError):
            chat(client, messages=target)
        assert chat(client, messages=target).choices[0].finish_reason == "stop"
    assert [e.outcome for e in srv.log] == ["ok", "503", "ok"]


def test_random_faults_are_reproducible() -> None:
    def run() -> list[str]:
        plan = FaultPlan(rate=0.5, seed=7, kinds=["500", "empty"])
        with FakeOpenAI(models=["m-a"], faults=plan) as srv, client_for(srv) as client:
            for _ in range(12):
                with suppress(openai.InternalServerError):
                    chat(client)
        return [e.outcome for e in srv.log]

    first = run()
    assert first == run()
    assert {"ok", "500", "empty"} <= set(first)


def test_fault_plan_validates() -> None:
    with pytest.raises(ValueError):
        FaultPlan(script=["418"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        FaultPlan(rate=2.0)


def test_hung_request_blocks_nothing_and_stop_frees_port() -> None:
    hang_messages = [{"role": "user", "content": "hang"}]
    plan = FaultPlan(per_request={("m-a", messages_sha256(hang_messages)): ["timeout"]}, hang_s=30)
    errors: list[BaseException] = []
    srv = FakeOpenAI(models=["m-a"], faults=plan).start()
    port = srv.port

    def hang() -> None:
        with client_for(srv, timeout=20) as client:
            try:
                chat(client, messages=hang_messages)
            except BaseException as exc:
                errors.append(exc)

    thread = threading.Thread(target=hang, daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + 5
        while not srv.counts() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.counts() == {("m-a", "timeout"): 1}

        with client_for(srv, timeout=2) as client:
            started = time.monotonic()
            assert chat(client).choices[0].finish_reason == "stop"
            assert time.monotonic() - started < 1.0
    finally:
        started = time.monotonic()
        srv.stop()
        stop_s = time.monotonic() - started
    assert stop_s < 1.0
    thread.join(5)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)

    with socket.socket() as sock:  # the port is free again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_timeout_answers_after_hang() -> None:
    plan = FaultPlan(script=["timeout"], hang_s=0.2)
    with FakeOpenAI(models=["m-a"], faults=plan) as srv, client_for(srv, timeout=5) as client:
        started = time.monotonic()
        assert chat(client).choices[0].finish_reason == "stop"
        assert time.monotonic() - started >= 0.2


# -- process mode -------------------------------------------------------------------------------


def _read_ready(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "fake server did not print READY in time"
    line = proc.stdout.readline().strip()
    assert line.startswith("READY http://127.0.0.1:"), line
    return line.removeprefix("READY ")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_process_mode(tmp_path: Path, sig: signal.Signals) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"fizzbuzz": "```python\nprint('fizz')\n```"}))
    log = tmp_path / "served.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(FAKE_SCRIPT),
            "--port",
            "0",
            "--models",
            "m-a,m-b",
            "--api-key",
            "sk-test",
            "--replies",
            str(replies),
            "--script",
            "429",
            "--retry-after",
            "0.1",
            "--delay",
            "0.01",
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = _read_ready(proc)
        with openai.OpenAI(
            base_url=base_url,
            api_key="sk-test",
            max_retries=1,
            timeout=5,
            http_client=openai.DefaultHttpxClient(trust_env=False),
        ) as client:
            assert [m.id for m in client.models.list()] == ["m-a", "m-b"]
            resp = client.chat.completions.create(
                model="m-b", messages=[{"role": "user", "content": "write fizzbuzz"}]
            )
            assert resp.choices[0].message.content == "```python\nprint('fizz')\n```"
            other = client.chat.completions.create(model="m-a", messages=MESSAGES)
            assert other.choices[0].message.content == default_reply(
                {"model": "m-a", "messages": MESSAGES}
            )
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["path"], e["model"], e["outcome"]) for e in entries] == [
        ("/v1/models", None, "ok"),
        (CHAT_PATH, "m-b", "429"),
        (CHAT_PATH, "m-b", "ok"),
        (CHAT_PATH, "m-a", "ok"),
    ]
    assert entries[-1]["messages_sha256"] == messages_sha256(MESSAGES)
    assert all(isinstance(e["t"], float) for e in entries)
