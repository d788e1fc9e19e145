"""Transport ``http``: ``POST <base_url>/ingest`` and ``POST <base_url>/query``, JSON both ways.

The key, when ``key_env`` names its variable, is read with
:func:`cvb_engine.endpoints.read_key` at each request (so a missing variable
is the failure of that request) and sent as ``Authorization: Bearer <key>``;
it is scrubbed from every string the layer sends back and from every error
message. Bodies are read with the bound of :class:`cvb_engine.replies.BoundedClient`;
a body cut there is a failure, not a shortened answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from cvb_engine.endpoints import key_variable_problem_or_error, read_key
from cvb_engine.memory_layers.base import MemoryLayer, register_transport
from cvb_engine.memory_layers.protocol import (
    MAX_REPLY_BYTES,
    LayerError,
    LayerFault,
    LayerSpec,
    Op,
    decode_json,
    encode,
    quote,
)
from cvb_engine.replies import CUT, BoundedClient

#: An error body is quoted up to this many characters.
_BODY_QUOTE_CHARS = 300


def check_base_url(url: str) -> str:
    """``url`` without its trailing slash; raise :class:`LayerError` unless it is http(s)."""
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise LayerError(f"memory layer url= is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LayerError(
            "memory layer url= must be an http:// or https:// URL with a host, "
            "e.g. http://127.0.0.1:8700"
        )
    if parts.username is not None or parts.password is not None:
        # The URL is stored on every record as the layer's label.
        raise LayerError(
            "memory layer url= must not hold credentials; put the key in an environment "
            "variable and name it with key_env="
        )
    if parts.query or parts.fragment:
        raise LayerError("memory layer url= must not have a query or fragment (/ingest is added)")
    return url


@register_transport("http")
class HttpLayer(MemoryLayer):
    def __init__(self, spec: LayerSpec, *, state_dir: Path) -> None:
        super().__init__(spec, state_dir=state_dir)
        self._base = check_base_url(spec.target)
        self._key = ""
        self._client = BoundedClient(max_body_bytes=MAX_REPLY_BYTES, timeout=spec.timeout_s)

    @classmethod
    def check_target(cls, target: str, key_env: str | None) -> str:
        if key_env:
            problem = key_variable_problem_or_error(key_env)
            if problem:
                raise LayerError(f"memory layer key_env=: {problem}")
        return check_base_url(target)

    def _secret(self) -> str:
        return self._key

    def _read_key(self) -> str:
        name = self.spec.key_env
        if not name:
            return ""
        problem = key_variable_problem_or_error(name)
        if problem:
            raise LayerFault(f"cannot read its key: {problem}")
        if not os.environ.get(name, "").strip():
            raise LayerFault(
                f"cannot read its key: the environment variable {name} (key_env) is not set; "
                "export it with the layer's key"
            )
        return read_key(name)

    async def _exchange(self, op: Op, request: dict[str, Any]) -> object:
        self._key = self._read_key()
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._key:
            headers["authorization"] = f"Bearer {self._key}"
        url = f"{self._base}/{op}"
        try:
            response = await self._client.post(url, content=encode(request), headers=headers)
        except httpx2.TimeoutException:
            raise LayerFault(f"timed out after {float(self.spec.timeout_s)} s") from None
        except httpx2.ConnectError as exc:
            raise LayerFault(f"cannot connect to {self._base}: {quote(str(exc), 300)}") from None
        except httpx2.HTTPError as exc:
            raise LayerFault(
                f"failed: {type(exc).__name__}: {quote(str(exc), 300)} ({url})"
            ) from None
        if response.extensions.get(CUT) is not None:
            raise LayerFault(f"replied with a body over {MAX_REPLY_BYTES // 2**20} MiB")
        if not 200 <= response.status_code < 300:
            body = response.content.decode("utf-8", "replace")
            shown = quote(body, _BODY_QUOTE_CHARS) or "(empty body)"
            raise LayerFault(f"answered HTTP {response.status_code}: {shown}")
        return decode_json(response.content)

    async def aclose(self) -> None:
        await self._client.aclose()
