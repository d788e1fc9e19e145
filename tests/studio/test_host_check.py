"""The studio's door: a real ``cvb studio`` answers only requests addressed to it.

A page served under another name that resolves to 127.0.0.1 (DNS rebinding)
sends ``Host: attacker.test:PORT`` with a matching ``Origin``; Streamlit alone
serves it and accepts its websocket. ``studio/serve.py`` refuses both with 403.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import STARTUP_S, free_port, stop, wait_healthy

ALLOWED_NAME = "studio.lab.test"
ENV_NAME = "from-env.lab.test"


def studio_command(port: int, *extra: str) -> list[str]:
    cvb = shutil.which("cvb")
    command = [cvb] if cvb else [sys.executable, "-m", "cvb_engine.cli"]
    return [*command, "studio", "--port", str(port), *extra]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One ``cvb studio`` for the module, allowing one name by flag and one by environment."""
    tmp = tmp_path_factory.mktemp("host-check")
    port = free_port()
    env = {
        **os.environ,
        "CVB_DATABASE_URL": f"sqlite:///{tmp / 'cvb.db'}",
        "CVB_ENDPOINTS": str(tmp / "endpoints.json"),
        "CVB_STUDIO_ALLOWED_HOSTS": ENV_NAME,
    }
    log = tmp / "studio.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            studio_command(port, "--allow-host", ALLOWED_NAME, "--scenarios", str(tmp)),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield port
    finally:
        stop(proc)


def get(port: int, path: str, host: str | None, origin: str | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        if origin is not None:
            conn.putheader("Origin", origin)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def upgrade(port: int, host: str, origin: str) -> str:
    """The status line a websocket upgrade of ``/_stcore/stream`` gets."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        "GET /_stcore/stream HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        f"Origin: {origin}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: streamlit\r\n"
        "\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request.encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode("latin-1")


SERVED = ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}", "[::1]:{port}"]
SERVED += [f"{ALLOWED_NAME}:{{port}}", f"{ENV_NAME}:{{port}}", ALLOWED_NAME]
REFUSED = ["attacker.test:{port}", "127.0.0.1:1", "localhost", "127.0.0.1.attacker.test:{port}"]


@pytest.mark.parametrize("path", ["/", "/_stcore/health", "/_stcore/host-config", "/run"])
@pytest.mark.parametrize("host", SERVED)
def test_http_addressed_to_the_studio_is_served(studio: int, host: str, path: str) -> None:
    assert get(studio, path, host.format(port=studio)) == 200


@pytest.mark.parametrize(
    "path", ["/", "/_stcore/health", "/_stcore/host-config", "/static/x.js", "/nowhere"]
)
@pytest.mark.parametrize("host", REFUSED)
def test_http_with_a_foreign_host_is_refused(studio: int, host: str, path: str) -> None:
    h = host.format(port=studio)
    assert get(studio, path, h, origin=f"http://{h}") == 403


def test_http_without_host_is_refused(studio: int) -> None:
    # HTTP/1.1 without Host is malformed: uvicorn answers 400 before the guard runs;
    # HTTP/1.0 may omit it, and the guard refuses that.
    assert get(studio, "/", None) in (400, 403)
    with socket.create_connection(("127.0.0.1", studio), timeout=30) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert s.recv(4096).split(b"\r\n", 1)[0].split()[1] == b"403"


def test_http_with_a_foreign_origin_is_refused(studio: int) -> None:
    assert get(studio, "/", f"127.0.0.1:{studio}", origin="http://attacker.test") == 403
    assert get(studio, "/", f"127.0.0.1:{studio}", origin=f"http://127.0.0.1:{studio}") == 200


def test_websocket_of_a_rebound_page_is_refused(studio: int) -> None:
    host = f"attacker.test:{studio}"
    status = upgrade(studio, host, f"http://{host}")
    assert " 403 " in f"{status} ", status
    assert "101" not in status


def test_websocket_from_a_foreign_origin_is_refused(studio: int) -> None:
    status = upgrade(studio, f"127.0.0.1:{studio}", "http://attacker.test")
    assert " 403 " in f"{status} ", status


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", f"{ALLOWED_NAME}:{{port}}"]
)
def test_websocket_addressed_to_the_studio_is_accepted(studio: int, host: str) -> None:
    h = host.format(port=studio)
    status = upgrade(studio, h, f"http://{h}")
    assert status.startswith("HTTP/1.1 101"), status


def test_bad_allow_host_is_refused_before_start() -> None:
    done = subprocess.run(
        studio_command(free_port(), "--allow-host", "http://x/"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "not a host name" in done.stderr


def test_terminating_cvb_studio_stops_the_server(tmp_path: Path) -> None:
    """``kill -TERM`` of ``cvb studio`` alone (not its group) leaves nothing serving."""
    port = free_port()
    log = tmp_path / "studio.log"
    env = {**os.environ, "CVB_DATABASE_URL": f"sqlite:///{tmp_path / 'cvb.db'}"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            studio_command(port, "--scenarios", str(tmp_path)),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
            except OSError:
                break
            time.sleep(0.3)
        else:
            pytest.fail(f"the studio still serves after cvb studio ended:\n{log.read_text()}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
