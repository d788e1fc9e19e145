"""A small scripted agent program for ``agent@command=...`` tests (standard library only).

Follows the documented protocol: the task on stdin, the workspace as the working
directory, the file(s) to write in ``CVB_FILES``. ``python agent_cmd.py MODE``:

``reader``   reads AGENTS.md (and the nested one), then writes code following what it read
``writer``   writes at once, following nothing
``hostile``  tries to get out: writes outside the workspace, reads the runner's key
             variable, leaves a daemon behind, replaces the solution with a link to
             /etc/passwd; prints what worked as JSON on stdout
``sleeper``  writes the solution, then sleeps past any time limit
``noisy``    floods stdout and stderr, then writes the solution
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

GOOD = "import httpx\n\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n"
BAD = "import requests\n\n\ndef fetch_json(url):\n    return requests.get(url).json()\n"


def _try_write(path: str) -> bool:
    try:
        Path(path).write_text("planted", encoding="utf-8")
        return True
    except OSError:
        return False


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "writer"
    task = sys.stdin.read()
    target = Path(os.environ["CVB_FILES"].splitlines()[0])
    if mode == "reader":
        seen = ""
        for name in ("AGENTS.md", "fernhollow/AGENTS.md"):
            if Path(name).exists():
                seen += Path(name).read_text(encoding="utf-8")
        good = "standardized on httpx" in seen and "without a timeout" in seen
        target.write_text(GOOD if good else BAD, encoding="utf-8")
        print(f"read {len(seen)} characters of rules; task had {len(task)} characters")
        return 0
    if mode == "hostile":
        report = {
            "task": "fetch_json" in task,
            "cwd": os.getcwd() == os.environ.get("CVB_WORKSPACE"),
            "key": os.environ.get("CVB_TEST_RUNNER_KEY"),
            "env": sorted(os.environ),
            "wrote_outside": {
                p: _try_write(p)
                for p in [
                    *sys.argv[2:],
                    "/etc/cvb-planted",
                    "/root/cvb-planted",
                    "/var/tmp/cvb-planted",
                ]
            },
            "wrote_tmp": _try_write("/tmp/cvb-planted-in-private-tmp"),
            "wrote_home": _try_write(os.path.join(os.environ["HOME"], "notes.txt")),
        }
        # a daemon that would outlive the program (it must not outlive the sandbox)
        subprocess.Popen(
            [
                "/bin/sh",
                "-c",
                f"sleep 30; echo late > {sys.argv[2] if len(sys.argv) > 2 else '/tmp/x'}",
            ],
            start_new_session=True,
        )
        target.unlink(missing_ok=True)
        target.symlink_to("/etc/passwd")
        print(json.dumps(report))
        return 3
    if mode == "sleeper":
        target.write_text(BAD, encoding="utf-8")
        sys.stdout.write("going to sleep\n")
        sys.stdout.flush()
        time.sleep(120)
        return 0
    if mode == "noisy":
        chunk = "z" * 65_536
        for _ in range(200):  # 13 MB on each stream
            sys.stdout.write(chunk)
            sys.stderr.write(chunk)
        target.write_text(GOOD, encoding="utf-8")
        return 0
    target.write_text(BAD, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
