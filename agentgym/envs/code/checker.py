"""The checker of Code-v0's function-format grading: it runs the tests, never the answer.

``grader`` runs ``python3 -I -c SOURCE`` (``plain`` + this file) in the sandbox with a nonce
and the job on stdin: the answer's source, the task's prompt and test snippets, the names of
the functions under test, and the candidate's program (``candidate``). The checker:

1. makes itself non-dumpable (``PR_SET_DUMPABLE`` 0), so that a process of the same uid can no
   longer ptrace it, read or write its memory or open its descriptors through ``/proc``; blocks
   every signal that can be blocked (``SIGKILL`` and ``SIGSTOP`` can only make it fail); drops
   writable folders from ``sys.path``; reads its whole stdin; keeps its stdout (the verdict's
   descriptor) apart and sends ``print`` to stderr;
2. starts the candidate with stdin ``/dev/null``, stdout a pipe the checker drains, requests on
   fd 3, replies on fd 4, no other descriptor, and an empty signal mask;
3. runs the prompt (trusted helpers such as HumanEval's ``poly``), then each snippet in a
   namespace where the answer's functions are ``Remote`` proxies: a call sends its arguments
   as plain data (``plain``), the candidate calls its function, and the proxy returns the
   decoded result, exact builtin objects the answer never touched. An exception comes back as
   a builtin exception type with plain arguments. A crash, an exit, a ``BaseException``, a
   result that is not plain data or a broken reply fails the test whatever the test code does
   with it (``Aborted``); the next snippet gets a fresh candidate;
4. writes ``{"nonce", "passed", "total", "stdout", "error"}`` on the verdict descriptor.

Standard library only: ``plain``'s source runs before this one in the sandbox.
"""

import builtins
import fcntl
import importlib
import json
import os
import selectors
import signal
import sys

if __name__ != "__main__":  # imported on the host; in the sandbox ``plain`` precedes this source
    from agentgym.envs.code.plain import MAX_MESSAGE, NotPlain, decode, dumps, encode, loads

REQUESTS, REPLIES = 3, 4  # the candidate's descriptors
STDOUT_KEPT = 16 * 1024  # bytes of the candidate's stdout the verdict carries
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


class Aborted(BaseException):
    """The candidate cannot answer (it crashed, exited or sent what is not plain data)."""


class CandidateError(Exception):
    """An exception of the candidate's own type (no builtin exception class in its bases)."""


def _harden() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 or libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    writable = (os.getcwd(), "/tmp", os.environ.get("HOME", "/tmp"))
    sys.path[:] = [
        p
        for p in sys.path
        if p.startswith("/") and not any(p == w or p.startswith(w + "/") for w in writable)
    ]


def _high(fd: int) -> int:
    """``fd`` moved to a close-on-exec descriptor >= 10 (clear of 0-4 in the candidate)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Link:
    """The checker's end of the candidate process: start it, ask it, read its stdout."""

    def __init__(self, argv: list[str]) -> None:
        self.argv, self.pid = argv, 0
        self.failure: str | None = None
        self.stdout, self.dropped = bytearray(), 0
        self.fds: dict[str, int] = {}

    def start(self) -> None:
        self.stop()
        self.failure, self.buffer = None, b""
        (req_r, req_w), (rep_r, rep_w), (out_r, out_w) = (
            tuple(_high(fd) for fd in os.pipe()) for _ in range(3)
        )
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, req_r, REQUESTS),
            (os.POSIX_SPAWN_DUP2, rep_w, REPLIES),
        ]
        try:
            self.pid = os.posix_spawn(
                sys.executable,
                self.argv,
                dict(os.environ),
                file_actions=actions,
                setsigmask=(),
                setpgroup=0,
            )
        except OSError as e:
            self.failure = f"the process for your code could not start ({e})"
        for fd in (req_r, rep_w, out_w):
            os.close(fd)
        self.fds = {"requests": req_w, "replies": rep_r, "stdout": out_r}
        for fd in self.fds.values():
            os.set_blocking(fd, False)

    def ask(self, message: dict) -> dict:
        """Send ``message``, return the reply; ``Aborted`` if there is no sensible one."""
        if self.failure is not None:
            raise Aborted(self.failure)
        pending = dumps(message)
        with selectors.DefaultSelector() as sel:
            sel.register(self.fds["requests"], selectors.EVENT_WRITE, "requests")
            sel.register(self.fds["replies"], selectors.EVENT_READ, "replies")
            sel.register(self.fds["stdout"], selectors.EVENT_READ, "stdout")
            while True:
                for key, _ in sel.select():
                    if key.data == "requests":
                        pending = self._send(pending, sel)
                    elif key.data == "stdout":
                        self._keep(sel, key.fd)
                    elif (line := self._receive()) is not None:
                        return self._parse(line)

    def _send(self, pending: bytes, sel: selectors.BaseSelector) -> bytes:
        try:
            pending = pending[os.write(self.fds["requests"], pending[: 1 << 16]) :]
        except BlockingIOError:
            return pending
        except BrokenPipeError:
            self.fail("the process running your code ended")
        if not pending:
            sel.unregister(self.fds["requests"])
        return pending

    def _receive(self) -> bytes | None:
        try:
            chunk = os.read(self.fds["replies"], 1 << 20)
        except BlockingIOError:
            return None
        if not chunk:
            self.fail("the process running your code ended (it exited or crashed)")
        self.buffer += chunk
        line, newline, rest = self.buffer.partition(b"\n")
        if not newline:
            if len(self.buffer) > MAX_MESSAGE:
                self.fail(f"your code answered more than {MAX_MESSAGE} bytes")
            return None
        self.buffer = rest
        return line

    def _parse(self, line: bytes) -> dict:
        try:
            return loads(line)
        except Exception:
            self.fail("the process running your code sent a broken answer")
            raise  # unreachable: fail raises

    def _keep(self, sel: selectors.BaseSelector | None, fd: int) -> bool:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        if not chunk:
            if sel is not None:
                sel.unregister(fd)
            return False
        room = STDOUT_KEPT - len(self.stdout)
        self.stdout += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)
        return True

    def fail(self, why: str) -> None:
        """Mark the candidate as unable to answer (the test fails), stop it, raise ``Aborted``."""
        if self.failure is None:
            self.failure = why
        self.stop()
        raise Aborted(self.failure)

    def stop(self) -> None:
        if self.fds.get("stdout") is not None:
            for _ in range(64):  # what it printed before it went (bounded: it may print forever)
                if not self._keep(None, self.fds["stdout"]):
                    break
        if self.pid:
            for kill in (os.killpg, os.kill):
                try:  # noqa: SIM105 (contextlib would cost an import in every run)
                    kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:  # noqa: SIM105
                os.waitpid(self.pid, 0)  # a zombie still counts against RLIMIT_NPROC
            except ChildProcessError:
                pass
            self.pid = 0
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}

    def stdout_text(self) -> str:
        text = self.stdout.decode("utf-8", "replace")
        return text + (f"\n... ({self.dropped} more bytes)" if self.dropped else "")


class Remote:
    """Stands for one of the candidate's functions: plain arguments go, a plain result comes."""

    def __init__(self, link: Link, name: str) -> None:
        self._link, self.__name__, self.__qualname__ = link, name, name

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"

    def __call__(self, *args: object, **kwargs: object) -> object:
        try:
            request = {"op": "call", "name": self.__name__, "args": encode(list(args))}
            request["kwargs"] = encode(kwargs)
        except NotPlain as e:
            raise TypeError(f"the test passes {e} to {self.__name__}(), not plain data") from None
        reply = self._link.ask(request)
        if "ok" in reply:
            try:
                return decode(reply["ok"])
            except Exception:
                self._link.fail(f"{self.__name__}() answered something that is not plain data")
        if "raise" in reply:
            raise _rebuild(reply) from None
        self._link.fail(str(reply.get("abort", "the process running your code sent nonsense")))
        return None  # unreachable: fail raises


def _rebuild(reply: dict) -> Exception:
    """The builtin exception the candidate's reply describes (plain arguments only)."""
    names, args = reply.get("raise"), reply.get("args")
    try:
        args = tuple(decode(args))
    except Exception:
        args = ()
    message = " ".join(str(a) for a in args)
    for name in names if type(names) is list else ():
        cls = getattr(builtins, name, None) if type(name) is str else None
        if isinstance(cls, type) and issubclass(cls, Exception):
            for attempt in (args, (message,)):
                try:
                    error = cls(*attempt)
                except Exception:
                    continue
                trace = reply.get("trace")
                if type(trace) is str and hasattr(error, "add_note"):
                    error.add_note(f"Raised in your code:\n{trace[-4000:]}")
                return error
    return CandidateError(message)


def _names(code: object) -> set[str]:
    """The global (and attribute) names ``code`` and the functions inside it use."""
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= _names(const)
    return found


def _prepare(job: dict) -> tuple[dict, list, set[str]]:
    """The tests' namespace (the prompt's helpers), their code and the names to ask for.

    ``job["entry"]`` names the functions under test (the host found them: the prompt's stubs
    and what a top-level ``check(...)`` receives); other names the tests use that neither the
    prompt nor the builtins define are asked for too (a list of asserts calls the answer's
    functions by name).

    The prompt runs as the answer's module does (``__name__`` is ``"solution"``: a
    ``__main__`` block of it does not run), the tests as ``__main__`` (a test of theirs that
    only a ``__main__`` block holds still runs)."""
    namespace: dict = {"__name__": "solution"}
    try:
        exec(compile(job["prompt"], "prompt.py", "exec"), namespace)
    except Exception:  # a prompt that does not run alone (a body continues it): no helpers
        namespace = {}
    namespace["__name__"] = "__main__"
    tests, used = [], set()
    for index, snippet in enumerate(job["snippets"]):
        try:
            code = compile(snippet, f"test_{index}.py", "exec")
        except SyntaxError as e:
            tests.append(f"{type(e).__name__}: {e}\n")
            continue
        tests.append(code)
        used |= _names(code)
    entry = set(job["entry"])
    for name in entry:
        namespace.pop(name, None)
    wanted = entry | (used - set(namespace) - set(dir(builtins)))
    return namespace, tests, wanted


def _load(link: Link, source: str, wanted: set[str], namespace: dict, *, fresh: bool) -> bool:
    """Run ``source`` in the candidate (a ``fresh`` process); bind its functions of ``wanted``.

    A name the answer holds a standard module under gets the checker's own import of that
    module; a callable gets a ``Remote``; nothing else is bound (its values could steer what
    the tests expect)."""
    if fresh:
        link.start()
    try:
        reply = link.ask({"op": "load", "source": source, "names": sorted(wanted)})
    except Aborted:
        return False
    if reply.get("loaded") is not True:
        link.failure = "your code failed before the tests ran"
        return False
    kinds = reply.get("names")
    for name in wanted:
        kind = kinds.get(name) if type(kinds) is dict else None
        if kind == "call":
            namespace[name] = Remote(link, name)
        elif kind == "module" and name in sys.stdlib_module_names:
            namespace[name] = importlib.import_module(name)
    return True


def _run_test(index: int, test: object, namespace: dict, link: Link, snippets: list) -> bool:
    if isinstance(test, str):
        sys.stderr.write(f"Test {index} does not compile: {test}")
        return False
    try:
        exec(test, namespace)
    except BaseException as e:
        reason = f" ({link.failure})" if isinstance(e, Aborted) else ""
        sys.stderr.write(f"Test {index} failed{reason}:\n{_traceback(snippets)}")
        return False
    if link.failure is not None:  # the test caught the candidate's failure: it fails anyway
        sys.stderr.write(f"Test {index} failed: {link.failure}\n")
        return False
    return True


def _traceback(snippets: list) -> str:
    """The current exception's traceback through the tests (the checker's frames left out)."""
    import linecache
    import traceback

    for i, snippet in enumerate(snippets):
        linecache.cache[f"test_{i}.py"] = (len(snippet), None, snippet.splitlines(True), "t")
    kind, error, tb = sys.exc_info()
    frames = [f for f in traceback.extract_tb(tb) if f.filename != "<string>"]
    lines = traceback.format_list(frames) + traceback.format_exception_only(kind, error)
    return "Traceback (most recent call last):\n" + "".join(lines)


def check(job: dict) -> tuple[int, str]:
    """Run ``job``'s tests against the candidate; the number that passed and its stdout."""
    flags = "-I" if job["candidate_site"] else "-IS"
    link = Link([sys.executable, flags, "-c", job["candidate"]])
    link.start()  # it starts up while the tests are prepared
    namespace, tests, wanted = _prepare(job)
    passed, loaded = 0, _load(link, job["source"], wanted, namespace, fresh=False)
    for index, test in enumerate(tests):
        if loaded and link.failure is not None:  # it failed the last test: a fresh process
            loaded = _load(link, job["source"], wanted, namespace, fresh=True)
        if not loaded:
            sys.stderr.write(f"Test {index} failed: {link.failure}\n")
            continue
        passed += _run_test(index, test, namespace, link, job["snippets"])
    link.stop()
    return passed, link.stdout_text()


def main() -> None:
    try:
        _harden()
        error = None
    except Exception as e:
        error = f"the checker cannot protect itself here: {e}"
    verdict_fd = _high(os.dup(1))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    nonce = sys.stdin.readline().strip()
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    verdict = {"nonce": nonce, "passed": 0, "total": len(job["snippets"]), "error": error}
    if error is None:
        verdict["passed"], verdict["stdout"] = check(job)
    sys.stderr.flush()
    os.write(verdict_fd, json.dumps(verdict).encode())
    os._exit(0)


if __name__ == "__main__":
    main()
