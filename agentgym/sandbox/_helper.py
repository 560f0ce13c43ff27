"""The process that starts a local sandbox's commands, from inside the sandbox.

It runs once per sandbox (``python -I -S -c <exec stdin> FD MODE``, this source on stdin), so a
run costs a fork and an exec in namespaces that already exist instead of a fresh bubblewrap.
Standard library only; it must not import agentgym.

Protocol over the SOCK_SEQPACKET socket FD, one JSON object per message:

- host -> helper ``{"op": "run", "id": N}`` with fds [stdout, stderr, request, stdin?];
  ``request`` is a memfd holding ``{"argv", "env", "cwd", "rlimits"}``.
  The helper answers ``{"id": N, "status": S}`` when the command exits (``S`` < 0: killed by
  signal -S), after killing every process the command left behind; ``{"id": N, "error": ...}``
  if it could not start it.
- host -> helper ``{"op": "kill"}``: kill every process of the running command now.
- EOF: kill everything and exit.

MODE ``all`` (the sandbox's processes are all the helper's user has: a pid namespace, or a uid of
its own): cleanup is ``kill(-1)``, every process but the helper (and pid 1). MODE ``group``: the
command's process group.
"""

import json
import os
import resource
import selectors
import signal
import socket
import sys

_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "cpu": resource.RLIMIT_CPU,
    "core": resource.RLIMIT_CORE,
}


def _exec_child(req, fds):
    """In the forked child: wire up stdio, apply limits, exec. Never returns."""
    argv = req["argv"]
    try:
        os.setsid()
        stdin = fds[3] if len(fds) > 3 else os.open(os.devnull, os.O_RDONLY)
        for target, fd in ((0, stdin), (1, fds[0]), (2, fds[1])):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(req["cwd"])
        for name, value in req["rlimits"].items():
            resource.setrlimit(_RLIMITS[name], (value, value))
        os.execvpe(argv[0], argv, req["env"])
    except BaseException as e:  # report and exit like a shell that cannot run a command
        try:
            os.write(2, f"sandbox: cannot run {argv[0]!r}: {e}\n".encode())
        finally:
            os._exit(127)


class Helper:
    def __init__(self, sock, mode):
        self.sock, self.mode = sock, mode
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, None)
        self.running = {}  # pidfd -> (id, pid)

    def send(self, **msg):
        self.sock.send(json.dumps(msg).encode())

    def kill_all(self, pid=None):
        """Kill what a command left: all our user's processes, or the command's process group."""
        try:
            if self.mode == "all":
                os.kill(-1, signal.SIGKILL)
            else:
                for p in [pid] if pid else [p for _, p in self.running.values()]:
                    os.killpg(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def start(self, header, fds):
        rid = header["id"]
        try:
            req = json.loads(os.pread(fds[2], os.fstat(fds[2]).st_size, 0))
            pid = os.fork()
        except (OSError, ValueError) as e:
            pid = None
            self.send(id=rid, error=f"cannot start: {e}")
        if pid == 0:
            _exec_child(req, fds)
        for fd in fds:
            os.close(fd)
        if pid is None:
            return
        pidfd = os.pidfd_open(pid)
        self.running[pidfd] = (rid, pid)
        self.sel.register(pidfd, selectors.EVENT_READ, "child")

    def reap(self, pidfd):
        rid, pid = self.running.pop(pidfd)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        self.kill_all(pid)
        self.send(id=rid, status=os.waitstatus_to_exitcode(status))

    def serve(self):
        self.send(ready=True)
        while True:
            for key, _ in self.sel.select():
                if key.data == "child":
                    self.reap(key.fd)
                    continue
                msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 4)
                if not msg:
                    self.kill_all()
                    return
                header = json.loads(msg)
                if header["op"] == "run":
                    self.start(header, fds)
                elif header["op"] == "kill":
                    self.kill_all()


def _not_dumpable():
    """Keep the sandbox's own commands (same user) from ptrace-ing this process or reading its
    memory through /proc; a command's exec makes it dumpable again, so only the helper is."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    _not_dumpable()
    Helper(socket.socket(fileno=int(sys.argv[1])), sys.argv[2]).serve()
