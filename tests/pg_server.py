"""A throwaway PostgreSQL server for the tests (Debian's binaries, started by hand).

``initdb`` + ``pg_ctl`` as the ``postgres`` user (pg_ctl refuses root), on a free
port of 127.0.0.1, in a temporary data folder owned by ``postgres``; stopped and
removed at the end of the session. ``CVB_TEST_PG_URL`` points the tests at an
existing server instead.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self, settings: dict[str, str] | None = None) -> None:
        """``settings``: more server settings (``-c name=value``), e.g. to load an extension."""
        self.settings = dict(settings or {})
        self.dir: Path | None = None
        self.port = 0
        self.url = ""

    def _as_postgres(self, *argv: str) -> subprocess.CompletedProcess[str]:
        if os.geteuid() == 0:
            argv = ("runuser", "-u", "postgres", "--", *argv)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> str:
        initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("PostgreSQL binaries not found (apt-get install postgresql)")
        parent = Path(tempfile.mkdtemp(prefix="cvb-pg-"))
        self.dir = parent / "data"
        if os.geteuid() == 0:
            shutil.chown(parent, "postgres", "postgres")
        init = self._as_postgres(initdb, "-D", str(self.dir), "--auth=trust", "-U", "postgres")
        if init.returncode:
            raise RuntimeError(f"initdb failed: {init.stderr[-500:]}")
        self.port = _free_port()
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off"
        opts += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        started = self._as_postgres(
            pg_ctl, "-D", str(self.dir), "-w", "-l", str(parent / "log"), "-o", opts, "start"
        )
        if started.returncode:
            raise RuntimeError(f"pg_ctl start failed: {started.stderr[-500:]}")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        return self.url

    def stop(self) -> None:
        if self.dir is None:
            return
        pg_ctl = _bin("pg_ctl")
        if pg_ctl:
            self._as_postgres(pg_ctl, "-D", str(self.dir), "-m", "immediate", "stop")
        shutil.rmtree(self.dir.parent, ignore_errors=True)
        self.dir = None
