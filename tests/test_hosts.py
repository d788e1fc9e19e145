"""The studio's Host rule (DNS rebinding): which Host headers it answers."""

from __future__ import annotations

import pytest

from cvb_engine.hosts import (
    HostPort,
    allowed_from_env,
    host_allowed,
    is_loopback,
    normalise_allowed,
    parse_host_header,
)

PORT = 8501


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("127.0.0.1:8501", HostPort("127.0.0.1", 8501)),
        ("LOCALHOST:8501", HostPort("localhost", 8501)),
        ("localhost.:8501", HostPort("localhost", 8501)),
        ("localhost", HostPort("localhost", 80)),
        ("[::1]:8501", HostPort("::1", 8501)),
        ("[::1]", HostPort("::1", 80)),
        ("[0:0:0:0:0:0:0:1]:8501", HostPort("0:0:0:0:0:0:0:1", 8501)),
        (" studio.lab:9000 ", HostPort("studio.lab", 9000)),
        (None, None),
        ("", None),
        ("   ", None),
        ("::1", None),  # IPv6 must be bracketed
        ("::1:8501", None),
        ("[::1", None),
        ("[::1]x", None),
        ("[127.0.0.1]:8501", None),
        ("[evil.test]:8501", None),
        ("localhost:", None),
        ("localhost:abc", None),
        ("localhost:0", None),
        ("localhost:65536", None),
        ("localhost:8501:1", None),
        ("user@localhost:8501", None),
        ("localhost/x", None),
        ("localhost:8501?x", None),
        ("local host", None),
        ("lоcalhost", None),  # Cyrillic о
        ("..", None),
        ("-a.test", None),
    ],
    ids=lambda v: repr(v),
)
def test_parse_host_header(header: str | None, expected: HostPort | None) -> None:
    assert parse_host_header(header) == expected


@pytest.mark.parametrize(
    ("header", "bound", "allowed", "ok"),
    [
        pytest.param("127.0.0.1:8501", "127.0.0.1", (), True, id="ipv4-loopback"),
        pytest.param("localhost:8501", "127.0.0.1", (), True, id="localhost"),
        pytest.param("LocalHost:8501", "127.0.0.1", (), True, id="case"),
        pytest.param("localhost.:8501", "127.0.0.1", (), True, id="trailing-dot"),
        pytest.param("[::1]:8501", "127.0.0.1", (), True, id="ipv6-loopback"),
        pytest.param("[::1]:8501", "::1", (), True, id="bound-ipv6"),
        pytest.param("localhost:8501", "localhost", (), True, id="bound-localhost"),
        pytest.param("attacker.test:8501", "127.0.0.1", (), False, id="rebinding"),
        pytest.param("attacker.test.:8501", "127.0.0.1", (), False, id="rebinding-dot"),
        pytest.param("ATTACKER.test:8501", "127.0.0.1", (), False, id="rebinding-case"),
        pytest.param("localhost.attacker.test:8501", "127.0.0.1", (), False, id="suffix-trick"),
        pytest.param("127.0.0.1.nip.io:8501", "127.0.0.1", (), False, id="ip-prefix-name"),
        pytest.param("127.0.0.1:8502", "127.0.0.1", (), False, id="other-port"),
        pytest.param("127.0.0.1", "127.0.0.1", (), False, id="no-port-means-80"),
        pytest.param(None, "127.0.0.1", (), False, id="missing-host"),
        pytest.param("", "127.0.0.1", (), False, id="empty-host"),
        pytest.param("::1", "127.0.0.1", (), False, id="unbracketed-ipv6"),
        pytest.param("10.0.0.5:8501", "127.0.0.1", (), False, id="other-ip-on-loopback"),
        pytest.param("10.0.0.5:8501", "10.0.0.5", (), True, id="bound-lan-ip"),
        pytest.param("localhost:8501", "10.0.0.5", (), False, id="loopback-name-on-lan-ip"),
        pytest.param("10.0.0.5:8501", "0.0.0.0", (), True, id="wildcard-ip-literal"),
        pytest.param("[fe80::1]:8501", "::", (), True, id="wildcard-ipv6-literal"),
        pytest.param("localhost:8501", "0.0.0.0", (), True, id="wildcard-localhost"),
        pytest.param("box.lan:8501", "0.0.0.0", (), False, id="wildcard-name"),
        pytest.param("box.lan:8501", "0.0.0.0", ("box.lan",), True, id="allowed-name"),
        pytest.param("BOX.lan.:443", "127.0.0.1", ("box.lan",), True, id="allowed-any-port"),
        pytest.param("box.lan", "127.0.0.1", ("box.lan",), True, id="allowed-no-port"),
        pytest.param("box.lan:9000", "127.0.0.1", ("box.lan:9000",), True, id="allowed-port"),
        pytest.param("box.lan:9001", "127.0.0.1", ("box.lan:9000",), False, id="allowed-port-only"),
        pytest.param("other.lan:8501", "127.0.0.1", ("box.lan",), False, id="not-allowed"),
        pytest.param("sub.box.lan:8501", "127.0.0.1", ("box.lan",), False, id="no-subdomains"),
        pytest.param("[::1]:9000", "127.0.0.1", ("[::1]:9000",), True, id="allowed-ipv6-port"),
    ],
)
def test_host_allowed(header: str | None, bound: str, allowed: tuple[str, ...], ok: bool) -> None:
    assert (
        host_allowed(
            header, bound_address=bound, bound_port=PORT, allowed=normalise_allowed(allowed)
        )
        is ok
    )


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("studio.lab", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_normalise_allowed_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="not a host name"):
        normalise_allowed(["http://box.lan/"])


def test_allowed_from_env() -> None:
    env = {"CVB_STUDIO_ALLOWED_HOSTS": "box.lan, studio.example.org  lab:9000,"}
    assert allowed_from_env(env) == ["box.lan", "studio.example.org", "lab:9000"]
    assert allowed_from_env({}) == []
