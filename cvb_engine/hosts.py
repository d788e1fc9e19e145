"""Which ``Host`` headers the studio answers: the defence against DNS rebinding.

A page on ``attacker.test`` can make its own name resolve to 127.0.0.1; the
browser then treats the studio as same-origin with the attacker's page, and
only the ``Host`` header (``attacker.test:8501``) still says which name the
page used. So the studio answers a request only when its ``Host`` names the
address it is bound to, with the port it listens on, or a name the user
configured (``cvb studio --allow-host NAME``, ``CVB_STUDIO_ALLOWED_HOSTS``), as
Jupyter does. The rule is here, free of any web framework, so it can be tested
as a table; ``studio/serve.py`` applies it to every request.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: Names (comma- or space-separated) the user allows besides the bound address.
ALLOWED_HOSTS_ENV = "CVB_STUDIO_ALLOWED_HOSTS"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})
# A DNS name: labels of letters, digits, '-' and '_' (some intranets use '_').
_NAME_RE = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)
_PORT_RE = re.compile(r"^[0-9]{1,5}$")
DEFAULT_HTTP_PORT = 80


@dataclass(frozen=True)
class HostPort:
    """A parsed ``Host`` header: lower-case name or address (IPv6 without brackets), port."""

    host: str
    port: int


def parse_host_header(value: str | None, default_port: int = DEFAULT_HTTP_PORT) -> HostPort | None:
    """``value`` as (host, port), or None when it is missing or malformed.

    ``[::1]:8501`` gives ``("::1", 8501)``; a missing port is the scheme's
    default (``default_port``); a trailing dot (``localhost.``) and upper case
    are normalised away. Anything else (user info, a path, a bare IPv6 address
    without brackets, an empty or out-of-range port) is malformed.
    """
    if value is None:
        return None
    text = value.strip().lower()
    if not text or any(c in text for c in "/?#@\\ \t") or not text.isascii():
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        try:
            if ipaddress.ip_address(host).version != 6:
                return None
        except ValueError:
            return None
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        if text.count(":") > 1:
            return None  # an IPv6 address must be bracketed in a Host header
        host, _, port_text_ = text.partition(":")
        port_text = port_text_ if ":" in text else None
        host = host.removesuffix(".")
        if not _NAME_RE.match(host):
            return None
    if port_text is None:
        port = default_port
    elif _PORT_RE.match(port_text) and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        return None
    return HostPort(host, port)


def is_loopback(address: str) -> bool:
    """Whether ``address`` (a bind address such as ``127.0.0.1`` or ``localhost``) is loopback."""
    name = address.strip().lower().strip("[]").removesuffix(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def normalise_allowed(names: Iterable[str]) -> tuple[HostPort | str, ...]:
    """User-configured names: ``NAME`` (any port) or ``NAME:PORT`` / ``[V6]:PORT`` (that port).

    Raises:
        ValueError: naming an entry that is not a host name or address.
    """
    out: list[HostPort | str] = []
    for raw in names:
        entry = raw.strip().lower()
        if not entry:
            continue
        bare = entry.strip("[]").removesuffix(".")
        if _is_ip_literal(bare) or (":" not in entry and _NAME_RE.match(bare)):
            out.append(bare)
            continue
        parsed = parse_host_header(entry)
        if parsed is None:
            raise ValueError(f"not a host name or host:port: {raw!r}")
        out.append(parsed)
    return tuple(out)


def allowed_from_env(environ: dict[str, str] | os._Environ[str] | None = None) -> list[str]:
    """The names in ``$CVB_STUDIO_ALLOWED_HOSTS`` (comma- or space-separated)."""
    env = os.environ if environ is None else environ
    return [n for n in re.split(r"[,\s]+", env.get(ALLOWED_HOSTS_ENV, "")) if n]


def host_allowed(
    header: str | None,
    *,
    bound_address: str,
    bound_port: int,
    allowed: Iterable[HostPort | str] = (),
) -> bool:
    """Whether a request whose ``Host`` is ``header`` is addressed to this server.

    Args:
        header: the request's ``Host`` header (None when it has none: refused).
        bound_address: the address the server is bound to (``--host``).
        bound_port: the port the request arrived on.
        allowed: from :func:`normalise_allowed`: a name allows it on any port
            (a reverse proxy in front may use its own), a :class:`HostPort` only
            that port.

    Accepted, with the bound port: ``127.0.0.1``, ``localhost`` and ``[::1]``
    when the server is bound to loopback; the bound address itself; when bound
    to every interface (``0.0.0.0``, ``::``), loopback and any IP address
    literal (DNS rebinding needs a *name*, and the studio cannot know the names
    of this machine: allow them with ``--allow-host``).
    """
    parsed = parse_host_header(header)
    if parsed is None:
        return False
    for entry in allowed:
        if isinstance(entry, HostPort):
            if entry == parsed:
                return True
        elif entry == parsed.host:
            return True
    if parsed.port != bound_port:
        return False
    bound = bound_address.strip().lower().strip("[]").removesuffix(".")
    if parsed.host == bound:
        return True
    if (is_loopback(bound) or bound in WILDCARD_ADDRESSES) and parsed.host in LOOPBACK_NAMES:
        return True
    return bound in WILDCARD_ADDRESSES and _is_ip_literal(parsed.host)
