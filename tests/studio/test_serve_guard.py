"""``studio.serve.HostGuard`` as an ASGI middleware, without a server: what passes and what gets 403."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cvb_engine.hosts import normalise_allowed
from studio.serve import HostGuard

PORT = 8501


async def _app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def call(
    headers: list[tuple[str, str]],
    *,
    kind: str = "http",
    method: str = "GET",
    bound: str = "127.0.0.1",
    allowed: tuple[str, ...] = (),
    server: tuple[str, int | None] | None = ("127.0.0.1", PORT),
) -> Any:
    """The first message the guarded app sends: a status (HTTP) or accept/close (websocket)."""
    guard = HostGuard(_app, bound, normalise_allowed(allowed))
    sent: list[dict[str, Any]] = []
    scope: dict[str, Any] = {
        "type": kind,
        "method": method,
        "path": "/",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "server": server,
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    first = sent[0]
    return first.get("status", first["type"])


OWN = f"127.0.0.1:{PORT}"


@pytest.mark.parametrize(
    ("headers", "kwargs", "expected"),
    [
        pytest.param([("Host", OWN)], {}, 200, id="own-host"),
        pytest.param([("Host", f"localhost:{PORT}")], {}, 200, id="localhost"),
        pytest.param([("Host", f"evil.test:{PORT}")], {}, 403, id="rebinding"),
        pytest.param([], {}, 403, id="no-host"),
        pytest.param([("Host", OWN), ("Host", f"evil.test:{PORT}")], {}, 403, id="two-hosts"),
        pytest.param([("Host", OWN)], {"server": None}, 403, id="no-server-address"),
        pytest.param([("Host", OWN)], {"server": ("/tmp/s", None)}, 403, id="unix-socket"),
        pytest.param([("Host", "127.0.0.1:9999")], {}, 403, id="port-of-another-server"),
        pytest.param([("Host", OWN), ("Origin", f"http://{OWN}")], {}, 200, id="same-origin"),
        pytest.param([("Host", OWN), ("Origin", "http://evil.test")], {}, 403, id="foreign-origin"),
        pytest.param(
            [("Host", OWN), ("Origin", f"https://{OWN}")], {}, 200, id="https-origin-same-host"
        ),
        pytest.param([("Host", OWN), ("Origin", "null")], {}, 200, id="null-origin-get"),
        pytest.param(
            [("Host", OWN), ("Origin", "null")], {"method": "POST"}, 403, id="null-origin-post"
        ),
        pytest.param([("Host", OWN), ("Origin", "file://")], {}, 403, id="file-origin"),
        pytest.param(
            [("Host", OWN), ("Origin", "http://a"), ("Origin", f"http://{OWN}")],
            {},
            403,
            id="two-origins",
        ),
        pytest.param(
            [("Host", "studio.lab"), ("Origin", "https://studio.lab")],
            {"allowed": ("studio.lab",)},
            200,
            id="allowed-behind-proxy",
        ),
        pytest.param(
            [("Host", f"[::1]:{PORT}")], {"bound": "::1", "server": ("::1", PORT)}, 200, id="ipv6"
        ),
    ],
)
def test_http(headers: list[tuple[str, str]], kwargs: dict[str, Any], expected: int) -> None:
    assert call(headers, **kwargs) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("Host", OWN), ("Origin", f"http://{OWN}")], "websocket.accept"),
        (
            [("Host", f"evil.test:{PORT}"), ("Origin", f"http://evil.test:{PORT}")],
            "websocket.close",
        ),
        ([("Host", OWN), ("Origin", "http://evil.test")], "websocket.close"),
        ([("Host", OWN), ("Origin", "null")], "websocket.close"),
    ],
    ids=["own", "rebinding", "foreign-origin", "null-origin"],
)
def test_websocket(headers: list[tuple[str, str]], expected: str) -> None:
    assert call(headers, kind="websocket") == expected


def test_lifespan_passes_through() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def nothing() -> dict[str, Any]:
        return {}

    async def ignore(message: Any) -> None:
        pass

    asyncio.run(HostGuard(app, "127.0.0.1")({"type": "lifespan"}, nothing, ignore))
    assert seen == ["lifespan"]
