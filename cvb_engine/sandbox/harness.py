"""The harness: the program that runs model code and its test inside the sandbox.

A program, not a module of the studio: :mod:`cvb_engine.sandbox.launch` reads
this file as text and runs it with ``python -S -P -c``, alone (a one-shot
launch, through ``run_harness``) or in front of :mod:`cvb_engine.sandbox.zygote`.
It runs with the standard library only and never imports ``cvb_engine``.

Everything it needs after the solution starts running is bound to locals
before, so that patching builtins, json, os or this module from the solution
cannot change what it reports. Records on the result pipe are lines
"<nonce> PHASE <name>", "<nonce> PASS" or "<nonce> FAIL key=hex ..."
(:mod:`cvb_engine.sandbox.channel` reads them); the PASS line is built before
any untrusted code runs and written only after the test returned normally. It
imports nothing beyond os, resource and sys (json alone would add ~5 ms to
every start), and nothing at all at module level: ``TYPE_CHECKING`` stands in
for ``typing``'s, which only the type checker reads. ASCII only: the program
travels in argv.
"""

# try/except/pass, not contextlib.suppress: one import fewer at every start, and no
# name that the code could have patched by the time the harness reports
# ruff: noqa: SIM105

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def run_harness(
    workdir: str, nonce_fd: str | int, result_fd: str | int, mode: str, limits: str, path: str
) -> None:
    """Run ``.cvb-solution`` then ``.cvb-test`` from the working directory; report on ``result_fd``.

    ``mode`` is how the code is held: ``direct`` (run here: a namespace holds
    it), ``supervise`` (forked; this process stays its parent and kills what it
    leaves behind) or ``supervise-reap`` (also a sub-reaper that dies with its
    parent, where nothing else collects orphans). ``limits`` is
    ``RLIMIT_NAME=value,...``; ``path`` is added to ``sys.path``.
    """
    import os
    import resource
    import sys

    # workdir is not used here: it names the run in ps and /proc/*/cmdline
    nonce_fd, result_fd = int(nonce_fd), int(result_fd)
    nonce = os.read(nonce_fd, 128).decode()
    os.close(nonce_fd)
    sources = []
    for name in (".cvb-solution", ".cvb-test"):
        with open(name, "rb") as f:
            sources.append(f.read().decode("utf-8", "surrogatepass"))
        os.unlink(name)  # the hidden test is not left lying around for the code to read
    code, test = sources
    for item in limits.split(","):
        name, value = item.split("=")
        res, want = getattr(resource, name), int(value)
        hard = resource.getrlimit(res)[1]
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(res, (want, want + 1 if name == "RLIMIT_CPU" else want))
    sys.path.extend(p for p in path.split(os.pathsep) if p)
    if mode != "direct":
        # unshare and plain: stay as the parent of the code, so that the code's
        # os.getppid() is us and not the studio, and reap what it leaves behind.
        if mode == "supervise-reap":
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = SIGKILL
        pid = os.fork()
        if pid:
            os.close(result_fd)
            status = os.waitpid(pid, 0)[1]
            me = os.getpid()
            for _ in range(100):
                kids = []
                for entry in os.listdir("/proc"):
                    if entry.isdigit():
                        try:
                            with open(f"/proc/{entry}/stat", "rb") as f:
                                stat = f.read()
                        except OSError:
                            continue
                        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == me:
                            kids.append(int(entry))
                if not kids:
                    break
                for kid in kids:
                    try:
                        os.kill(kid, 9)
                    except OSError:
                        pass
                for kid in kids:
                    try:
                        os.waitpid(kid, 0)
                    except OSError:
                        pass
            rc = os.waitstatus_to_exitcode(status)
            os._exit(128 - rc if rc < 0 else rc)
    import builtins

    write, b_str, b_type, b_len, b_isinstance = os.write, str, type, len, isinstance
    exit_now, exc_base, syntax_error = os._exit, BaseException, SyntaxError
    run, b_compile = exec, compile
    pass_line = ("\n" + nonce + " PASS\n").encode()

    def phase(name: str) -> None:
        try:
            write(result_fd, ("\n" + nonce + " PHASE " + name + "\n").encode())
        except exc_base:
            pass

    def fail(where: str, exc: BaseException) -> "NoReturn":
        info: dict[str, object] = {"where": where}
        try:
            info["exc"] = b_str(b_type(exc).__name__)
            try:
                msg = b_str(exc)
            except exc_base:
                msg = "<unprintable message>"
            info["msg"] = msg[:600]
            # b_isinstance is isinstance, bound before the code ran: the type
            # checker does not narrow through the alias, hence the ignores
            if b_isinstance(exc, syntax_error) and exc.filename in ("<solution>", "<test>"):  # type: ignore[attr-defined]
                info["line_" + exc.filename[1:-1]] = exc.lineno  # type: ignore[attr-defined]
                info["msg"] = b_str(exc.msg)  # type: ignore[attr-defined]
            tb = exc.__traceback__
            last = None
            while tb is not None:
                fname, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
                if fname in ("<solution>", "<test>"):
                    info["line_" + fname[1:-1]] = line
                last = (fname, line)
                tb = tb.tb_next
            if last is not None and last[0] not in ("<solution>", "<test>"):
                info["inner"] = f"{last[0].rsplit('/', 1)[-1]}:{last[1]}"
        except exc_base:
            pass
        parts = []
        for key, value in info.items():
            try:
                parts.append(key + "=" + b_str(value).encode("utf-8", "backslashreplace").hex())
            except exc_base:
                pass
        try:
            write(result_fd, ("\n" + nonce + " FAIL " + " ".join(parts) + "\n").encode())
        except exc_base:
            pass
        try:  # a traceback for the human reading stderr; cosmetic, so last
            import linecache
            import traceback

            for name, src in (("<solution>", code), ("<test>", test)):
                linecache.cache[name] = (b_len(src), None, src.splitlines(True), name)
            traceback.print_exception(exc)
            sys.stderr.flush()
        except exc_base:
            pass
        exit_now(1)

    module = b_type(sys)("solution")
    sys.modules["solution"] = module
    ns = module.__dict__
    ns["__builtins__"] = builtins
    phase("start")
    try:
        code_obj = b_compile(code, "<solution>", "exec", dont_inherit=True)
    except exc_base as exc:
        fail("compile-solution", exc)
    try:
        test_obj = b_compile(test, "<test>", "exec", dont_inherit=True)
    except exc_base as exc:
        fail("compile-test", exc)
    phase("solution")
    try:
        run(code_obj, ns)
    except exc_base as exc:
        fail("solution", exc)
    phase("test")
    try:
        run(test_obj, ns)
    except exc_base as exc:
        fail("test", exc)
    write(result_fd, pass_line)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except exc_base:
        pass
    exit_now(0)
