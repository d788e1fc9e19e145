"""The zygote: a pre-started harness inside one bwrap namespace, as its PID 1.

A program, not a module of the studio: :mod:`cvb_engine.sandbox.launch` reads
this file as text and runs it after :mod:`cvb_engine.sandbox.harness`, in one
``python -S -P -c`` program, with the standard library only (and, like it,
ASCII only).
:mod:`cvb_engine.sandbox.pool` is the other end of its control socket.

Starting bwrap and a fresh interpreter costs 20-40 ms per execution, more than
most tests take. A zygote is a Python process started once inside a bwrap
namespace, as its PID 1, that forks one child per execution. What each child
gets is what a one-shot launch gets: the same namespaces and read-only view,
the harness with its nonce, rlimits, a fresh working directory, the scrubbed
environment; and what it could leave behind is removed before the next one:

* processes: after the child exits, the zygote SIGKILLs every other process
  of its PID namespace (``kill(-1)`` from PID 1) and reaps them all;
* files: the working directory is removed by the studio; the private /tmp
  and /dev/shm are emptied by the zygote;
* the zygote itself: a process cannot signal its namespace's init (except
  with signals init handles; only SIGINT would be, and it is ignored), and
  the zygote is not dumpable, so the code cannot ptrace it or write its
  memory through /proc/1/mem;
* anything unusual (timeout, output flood, a zygote that does not answer)
  tears the whole namespace down; the next execution starts a new one.

The pids cgroup of a zygote holds the namespace's processes, so the task
limit bounds each execution the way it bounds a one-shot launch.

The control socket: the zygote writes ``R`` once ready; then, per execution,
it receives ``<workdir>\\0<limits>`` with four descriptors (stdout, stderr,
the nonce pipe, the result pipe), and answers ``E <wait status>`` when the
child has exited and ``D`` once its namespace is swept clean. Every message
from the zygote is one line.
"""

# try/except/pass, as in the harness: the zygote imports only what it needs
# ruff: noqa: SIM105

TYPE_CHECKING = False
if TYPE_CHECKING:
    # in the program, run_harness is defined just before this file's text
    from cvb_engine.sandbox.harness import run_harness


def _zygote(ctl_fd: str, path: str, root: str, mounts: str = "") -> None:
    """Serve executions on the control socket ``ctl_fd`` until the studio closes it."""
    # root names the zygote, and every fork of it, in ps; it and mounts (the
    # interpreter's read-only binds, when they live under /tmp) survive a sweep
    import ctypes
    import os
    import shutil
    import signal
    import socket

    keep = [root] + [m for m in mounts.split(os.pathsep) if m]
    for name in (
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "typing",
    ):
        try:  # what tests usually import; random reseeds itself in each fork
            __import__(name)
        except BaseException:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    base_env = dict(os.environ)
    ctl = socket.socket(fileno=int(ctl_fd))

    def sweep() -> None:
        for _ in range(100):
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
            if not [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]:
                break
        clean("/tmp")
        clean("/dev/shm")
        clean(root)  # the working directory, and whatever the code put beside it

    def clean(top: str) -> None:
        # empty a private tmpfs, but for the bind mounts kept (and the way to them)
        for entry in os.listdir(top):
            where = os.path.join(top, entry)
            if where in keep:
                continue
            if any(k.startswith(where + "/") for k in keep):
                clean(where)
            elif os.path.isdir(where) and not os.path.islink(where):
                shutil.rmtree(where, ignore_errors=True)
            else:
                try:
                    os.unlink(where)
                except OSError:
                    pass

    ctl.sendall(b"R\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 4:
            os._exit(0)  # the studio is gone
        workdir, limits = msg.decode().split("\0")
        out_fd, err_fd, nonce_fd, result_fd = fds
        pid = os.fork()
        if pid == 0:
            try:
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                low, high = sorted((nonce_fd, result_fd))
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, 1 << 16)
                ctl.detach()
                os.chdir(workdir)
                os.environ.clear()
                os.environ.update(base_env, HOME=workdir, PWD=workdir, TMPDIR=workdir)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                libc.prctl(4, 1, 0, 0, 0)
                os.setsid()
            except BaseException:
                os._exit(71)
            run_harness(workdir, nonce_fd, result_fd, "direct", limits, path)
            os._exit(70)
        for fd in fds:
            os.close(fd)
        status = -1
        while True:
            try:
                status = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            break
        try:
            ctl.sendall(b"E %d\n" % status)
            sweep()
            ctl.sendall(b"D\n")
        except OSError:
            os._exit(0)
