"""Run the studio under Streamlit with a Host check in front of every request.

``cvb studio`` starts ``python studio/serve.py APP [streamlit options]``
instead of ``streamlit run``. Before Streamlit starts, this module makes every
ASGI application handed to uvicorn pass through :class:`HostGuard`, which
refuses with 403 any HTTP request or websocket upgrade (``/_stcore/stream``
included) whose ``Host`` is not the bound address with the port the request
came in on, or a name the user allowed (``--allow-host`` →
``$CVB_STUDIO_ALLOWED_HOSTS``): the defence Jupyter uses against DNS
rebinding (see :mod:`cvb_engine.hosts` for the rule). A request that carries a
foreign ``Origin`` is refused too.

Why this and not the alternatives:

* Streamlit's own ``server.allowedHosts`` covers the websocket only and
  ignores the port, and its default is to accept any Host.
* A reverse proxy in front would be a second server to start, stop, and keep
  correct for websockets, streaming and every route Streamlit adds, and the
  real server would still listen on loopback for anyone to call directly.
* The guard wraps the application at ``uvicorn.Config``, the one public
  uvicorn call every Streamlit server path goes through (``UvicornServer``
  and ``UvicornRunner`` alike), so it sits outside every route Streamlit has
  now or adds later. It fails closed: if a Streamlit upgrade ever starts a
  server that did not come through the guard, :func:`main` stops the process
  rather than serve unguarded (``_check_guarded``), and a test starts the real
  studio to prove refusals.

When ``$CVB_STUDIO_PARENT_PID`` is set (``cvb studio`` sets it), the studio
stops when that process goes away: ``kill -TERM`` of ``cvb studio`` then
leaves nothing serving.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

# Run as a script (`python studio/serve.py`): make `studio` and `cvb_engine`
# importable from a checkout, as streamlit_app.py does.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from cvb_engine import (  # noqa: E402
    ALLOWED_HOSTS_ENV,
    HostPort,
    allowed_from_env,
    host_allowed,
    normalise_allowed,
    parse_host_header,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PARENT_ENV = "CVB_STUDIO_PARENT_PID"
_LOG = logging.getLogger("cvb.studio.serve")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_REFUSAL = (
    b"403 Forbidden: this studio answers only requests addressed to the host it is bound to. "
    b"To open it under another name, start it with `cvb studio --allow-host NAME`.\n"
)
_ORIGIN_DEFAULT_PORTS = {"http": 80, "https": 443}


class HostGuard:
    """ASGI middleware: only requests addressed to this server reach ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        bound_address: str,
        allowed: tuple[HostPort | str, ...] = (),
    ) -> None:
        self.app = app
        self.bound_address = bound_address
        self.allowed = allowed

    def _allowed(self, netloc: str | None, port: int, default_port: int = 80) -> bool:
        parsed = parse_host_header(netloc, default_port)
        if parsed is None:
            return False
        header = (
            f"[{parsed.host}]:{parsed.port}"
            if ":" in parsed.host
            else f"{parsed.host}:{parsed.port}"
        )
        return host_allowed(
            header, bound_address=self.bound_address, bound_port=port, allowed=self.allowed
        )

    def permits(self, scope: Scope) -> bool:
        """Whether the request in ``scope`` is addressed to this server (Host and Origin)."""
        server = scope.get("server")
        if not server or server[1] is None:
            return False  # a unix socket or an unknown transport: nothing to compare with
        port = int(server[1])
        hosts = [v for k, v in scope.get("headers", ()) if k.lower() == b"host"]
        if len(hosts) != 1:
            return False  # none, or several (which one would Streamlit use?)
        if not self._allowed(hosts[0].decode("latin-1"), port):
            return False
        origins = [v for k, v in scope.get("headers", ()) if k.lower() == b"origin"]
        if not origins:
            return True  # same-origin GETs and non-browser clients send none
        if len(origins) > 1:
            return False
        origin = origins[0].decode("latin-1").strip()
        if origin == "null":
            # Sandboxed frames send "null"; let them read, never write or connect.
            return scope["type"] == "http" and scope.get("method", "GET") in _SAFE_METHODS
        scheme, sep, netloc = origin.partition("://")
        if not sep or scheme.lower() not in _ORIGIN_DEFAULT_PORTS:
            return False
        return self._allowed(netloc, port, _ORIGIN_DEFAULT_PORTS[scheme.lower()])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.permits(scope):
            await self.app(scope, receive, send)
            return
        _LOG.debug("refused a request with a foreign Host or Origin")
        if scope["type"] == "websocket":
            # Closing before accepting makes the server answer the upgrade with 403.
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(_REFUSAL)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": _REFUSAL})


_guarded: list[HostGuard] = []


def install(allowed: tuple[HostPort | str, ...]) -> None:
    """Wrap every application given to ``uvicorn.Config`` from now on in :class:`HostGuard`."""
    import uvicorn

    original = uvicorn.Config
    if getattr(original, "_cvb_guarded", False):
        return

    class GuardedConfig(original):  # type: ignore[misc, valid-type]
        _cvb_guarded = True

        def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
            host = kwargs.get("host", args[0] if args else "127.0.0.1")
            if isinstance(app, str):
                raise RuntimeError("cvb studio: an app given by import string is not guarded")
            guard = HostGuard(app, str(host), allowed)
            _guarded.append(guard)
            super().__init__(guard, *args, **kwargs)

    uvicorn.Config = GuardedConfig  # type: ignore[misc]


def _check_guarded() -> None:
    """Stop the process if Streamlit started a server that is not behind the guard."""
    from streamlit.web.server import server as st_server

    original_start = st_server.Server.start

    async def start(self: Any) -> None:
        await original_start(self)
        if not _guarded:
            sys.stderr.write(
                "cvb studio: Streamlit started its server without the Host check "
                "(an unsupported Streamlit version?); stopping rather than serve unguarded.\n"
            )
            sys.stderr.flush()
            os._exit(3)

    st_server.Server.start = start  # type: ignore[method-assign]


def _watch_parent() -> None:
    """Stop (as on Ctrl-C) once the process named by ``$CVB_STUDIO_PARENT_PID`` is gone."""
    try:
        parent = int(os.environ.get(PARENT_ENV, ""))
    except ValueError:
        return
    if os.getppid() != parent:
        return  # already orphaned, or started by someone else: nothing to watch

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="cvb-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """``serve.py APP [streamlit run options]``: ``streamlit run`` behind the Host check."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.exit("usage: serve.py APP [streamlit run options]")
    try:
        allowed = normalise_allowed(allowed_from_env())
    except ValueError as exc:
        sys.exit(f"cvb studio: ${ALLOWED_HOSTS_ENV}: {exc}")
    install(allowed)
    _check_guarded()
    _watch_parent()
    from streamlit.web import cli as st_cli

    st_cli.main(["run", *args], prog_name="streamlit")


if __name__ == "__main__":
    main()
