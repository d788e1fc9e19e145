"""Run model-written Python code and a test against it — the only package that does.

Threat model
------------
The code comes from a model answering a benchmark task. We defend against
*accidental damage* (a fork bomb, a runaway loop, a 10 GB allocation, a write
to the wrong path, a daemon left running) and *casual escape* (reading API keys
from the environment, phoning home, killing the harness, ``sys.exit(0)`` to
look successful). This is **not** a security boundary against a determined
attacker: the code shares the kernel with the host (a kernel exploit wins),
and because it runs in the same process as the harness it can, with
deliberate effort (walking interpreter frames to find the per-execution
nonce), forge a passing verdict. Semantic tricks such as returning an object
that compares equal to everything are the test author's business, not ours.

Every execution, whatever the backend:

* one child process (tree), in a fresh temporary directory removed afterwards
  (also ``HOME`` and ``TMPDIR``), stdin ``/dev/null``;
* an environment reduced to an allow-list (``PATH``, ``LANG``,
  ``PYTHONHASHSEED=0`` …): no API key or token of the parent is visible;
* rlimits: CPU time, address space (1 GiB), file size, open files, no core;
* a wall-clock timeout after which the whole tree is killed from outside
  (SIGKILL: ignoring SIGTERM or holding the GIL in a C loop does not help);
* stdout/stderr drained concurrently, the first 64 KiB of each kept, and the
  run killed beyond 16 MiB of output, so a 200 MB writer neither blocks nor
  fills memory;
* a verdict that comes from the harness, not from the exit code: the harness
  reads a random nonce from a pipe (not env, not argv) before the code runs and
  writes ``<nonce> PASS`` to a second pipe only after the test returned. Exit
  status 0, ``os._exit``, ``SystemExit``, closed stdout, a killed harness: all
  fail;
* when the cgroup file system is writable (root on most Linux machines), a
  per-execution ``pids`` cgroup caps processes + threads (64) and is emptied
  with SIGKILL afterwards, which also removes double-forked daemons.
  ``RLIMIT_NPROC`` is no substitute: the kernel does not enforce it for root.

Not bounded: the *total* memory of several processes (each has its own
1 GiB; there is no memory cgroup), the total size of the files written in the
temporary directory (each file ≤ 64 MiB), and CPU shares between executions.

Backends: model code runs in ``bwrap``. A weaker backend is used only when
the user names it (``--sandbox unshare|plain`` or ``CVB_SANDBOX``), with a
:class:`WeakSandboxWarning`; when bwrap does not work and none is named,
:func:`backend` raises with what is missing, before anything executes.

``bwrap``
    bubblewrap with new PID, network, IPC, UTS, user and cgroup namespaces,
    all capabilities dropped, and a read-only view of ``/usr``, a few ``/etc``
    files and the Python installation only — ``/root``, ``/home``, the
    project and the host ``/tmp`` are not there. Writable: the temporary
    directory, a 64 MiB private ``/tmp`` and ``/dev/shm``. No network at all
    (only a down loopback). Killing bwrap kills the namespace.

    Executions are forked from a *zygote*: a harness process started once
    inside such a namespace, as its PID 1, which forks one child per
    execution and, after it, kills every other process of the namespace and
    empties its ``/tmp``, ``/dev/shm`` and working area, so that nothing of
    one execution reaches the next (:mod:`~cvb_engine.sandbox.zygote` says
    what holds it apart). This saves the 20–40 ms of a bwrap launch and a fresh
    interpreter. A timeout, an output flood or a zygote that stops answering
    tears the namespace down. ``CVB_SANDBOX_ZYGOTE=0`` launches bwrap for every
    execution instead; so does a machine where a zygote cannot start.
``unshare``
    util-linux ``unshare`` with new PID, network, IPC and UTS namespaces. No
    network and every process dies with the namespace, but the code runs as
    the caller (root in CI) on the real file system: it **can** write or
    delete files anywhere the caller can.
``plain``
    A process group and rlimits only. **No** network isolation, no file
    system isolation, no PID namespace: the code can see and signal other
    processes of the same user (``os.kill(-1, 9)`` as root takes the machine
    down). Leftover processes are killed through the cgroup when there is one,
    else through a sub-reaper and the process group. Last resort only.

Semantics: the code and then the test run in one module namespace (the
HumanEval ``check`` convention), as module ``solution`` (so an
``if __name__ == "__main__":`` demo block does not run). The interpreter is
``sys.executable`` started with ``-S -P``: site-packages are on ``sys.path``
but ``.pth`` hooks are not executed (they cost 30–100 ms per start here and
are code from outside the benchmark).

The package, one module per concern (the two programs are files too, read as
text and run with the standard library only; the studio never imports them):

* :mod:`~cvb_engine.sandbox.backends`: the table of backends, what each isolates
  and leaves open;
* :mod:`~cvb_engine.sandbox.choice`: self-tests, the user's choice, what a
  backend isolates here;
* :mod:`~cvb_engine.sandbox.launch`: the programs, the command line around them,
  the bwrap view, the child's environment;
* :mod:`~cvb_engine.sandbox.oneshot`: one execution, one launch;
* :mod:`~cvb_engine.sandbox.pool`: the zygotes, from the studio's side;
* :mod:`~cvb_engine.sandbox.channel`: sources and nonce in, output and verdict out;
* :mod:`~cvb_engine.sandbox.outcome`: the :class:`ExecResult` and its reason;
* :mod:`~cvb_engine.sandbox.cgroup`: the pids cgroup of each execution;
* :mod:`~cvb_engine.sandbox.limits`: the :class:`Limits` of an execution;
* :mod:`~cvb_engine.sandbox.harness` and :mod:`~cvb_engine.sandbox.zygote`: the
  programs that run inside the sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from cvb_engine.sandbox import backends, oneshot, pool
from cvb_engine.sandbox.backends import BACKENDS, WEAKNESS, SandboxError, is_weaker
from cvb_engine.sandbox.cgroup import ENV_CGROUP
from cvb_engine.sandbox.choice import (
    ENV_BACKEND,
    SandboxInfo,
    WeakSandboxWarning,
    available_backends,
    backend,
    bwrap_fix,
    choose,
    info,
    self_test,
    with_backend,
)
from cvb_engine.sandbox.limits import DEFAULT_LIMITS, MAX_TIMEOUT_S, Limits
from cvb_engine.sandbox.outcome import ExecResult
from cvb_engine.sandbox.pool import ENV_ZYGOTE, shutdown, zygote_pids

#: The backend's name model code runs on when none is named (the strongest).
DEFAULT_BACKEND = backends.DEFAULT.name

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEFAULT_LIMITS",
    "ENV_BACKEND",
    "ENV_CGROUP",
    "ENV_ZYGOTE",
    "MAX_TIMEOUT_S",
    "WEAKNESS",
    "ExecResult",
    "Limits",
    "SandboxError",
    "SandboxInfo",
    "WeakSandboxWarning",
    "available_backends",
    "backend",
    "bwrap_fix",
    "choose",
    "info",
    "is_weaker",
    "run_many",
    "run_python",
    "self_test",
    "shutdown",
    "with_backend",
    "zygote_pids",
]


def run_python(
    code: str,
    test: str,
    *,
    timeout_s: float = 5.0,
    limits: Limits = DEFAULT_LIMITS,
    backend_name: str | None = None,
) -> ExecResult:
    """Run ``code`` then ``test`` in one namespace in a fresh sandboxed process.

    Args:
        code: the solution (model-written).
        test: the test, run after the solution in the same module namespace;
            it passes when it returns normally.
        timeout_s: wall-clock limit for the whole execution, start-up included.
        limits: resource limits.
        backend_name: one of ``BACKENDS``; default :func:`backend`.

    Returns:
        An :class:`ExecResult`. Problems of the code are results, not exceptions.

    Raises:
        SandboxError: no backend works, or the one asked for does not.
        ValueError: a timeout outside (0, 600].
    """
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}], got {timeout_s}")
    name = backend_name or backend()
    chosen = backends.get(name)
    if backend_name is not None and (problem := self_test(name)) is not None:
        raise SandboxError(f"backend {name} does not work here: {problem}")
    if chosen.zygote_prefix is not None and os.environ.get(ENV_ZYGOTE, "1") != "0":
        result = pool.run(chosen, code, test, timeout_s, limits)
        if result is not None:
            return result
    return oneshot.execute(code, test, timeout_s, limits, chosen)


def run_many(
    items: Iterable[tuple[str, str]],
    *,
    workers: int = 2,
    timeout_s: float = 5.0,
    limits: Limits = DEFAULT_LIMITS,
    backend_name: str | None = None,
) -> list[ExecResult]:
    """Run ``(code, test)`` pairs with up to ``workers`` sandboxed processes at a time.

    Results come back in the order of ``items``.
    """
    jobs: Sequence[tuple[str, str]] = list(items)
    name = backend_name or backend()
    with ThreadPoolExecutor(
        max_workers=max(1, workers), thread_name_prefix="cvb-sandbox"
    ) as executor:
        return list(
            executor.map(
                lambda job: run_python(
                    job[0], job[1], timeout_s=timeout_s, limits=limits, backend_name=name
                ),
                jobs,
            )
        )
