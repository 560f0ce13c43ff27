"""Checks of the test machinery, run inside the graded test process (see ``runner_script``).

Shipped into the grading sandbox next to the runner script; standard library only, Python 3.8
or later. ``Guard`` records the test machinery (pytest, pluggy, unittest, json and the runner's
own namespaces, ``builtins``, ``os``, ``sys``) before any code of the repository runs, and
reports what changed since; ``file_states`` / ``file_problems`` do the same for the
repository's code, configuration and test files. ``Origins`` says which source files may
legitimately provide test machinery: the system's read-only folders, and files of the
repository that existed before the run and that the graded diff does not change. A change made
by code from such a file (pytest's own plugins adding ``Node.fspath``, a repository's unchanged
conftest.py) is not a problem; anything else is. ``Bindings`` keeps the graded test modules'
names (what they imported, their functions and classes) as they were at import.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = [
    "Bindings",
    "Guard",
    "Hooks",
    "Origins",
    "file_problems",
    "file_states",
    "imported_names",
    "machinery",
    "report_problems",
]

_MISSING = object()
HOT = frozenset({"_pytest.runner", "_pytest.reports", "_pytest.python", "_pytest.unittest",
                 "_pytest.skipping", "_pytest.outcomes", "pluggy._callers", "pluggy._hooks",
                 "pluggy._result", "pluggy._manager", "json.encoder", "__main__",
                 "runner_guard", "runner_compare", "_pytest.assertion.rewrite"})  # fmt: skip
"""Modules checked at every test's call report (the reporting path); all of them at the end."""
REPORT_HOOKS = frozenset({"pytest_runtest_logreport", "pytest_runtest_makereport",
                          "pytest_runtest_protocol", "pytest_runtest_call", "pytest_pyfunc_call",
                          "pytest_report_teststatus", "pytest_runtest_setup",
                          "pytest_runtest_teardown", "pytest_make_collect_report"})  # fmt: skip
_OUTCOMES = ("passed", "failed", "skipped")
_CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pth", ".so", ".ini", ".cfg", ".toml")
_Entry = tuple  # (where, namespace, key, value, func, code, defaults)


def machinery() -> list[str]:
    """Names of the loaded modules whose namespaces ``Guard`` watches."""
    prefixes = ("_pytest", "pytest", "pluggy", "unittest", "json", "runner_guard",
                "runner_compare")  # fmt: skip
    found = [n for n in list(sys.modules) if n.split(".")[0] in prefixes]
    return [*found, "builtins", "os", "posix", "sys", "__main__"]


class Origins:
    """Which source files may provide test machinery (see the module docstring)."""

    def __init__(self, root: str, before: dict[str, object], changed: list[str], own: list[str]):
        self.root = os.path.realpath(root)
        self.before = before
        self.changed = frozenset(changed)
        self.own = frozenset(os.path.realpath(p) for p in own)
        trusted = {sys.prefix, sys.base_prefix, "/usr/lib", "/usr/local/lib"}
        for name in ("pytest", "_pytest", "pluggy"):
            path = getattr(sys.modules.get(name), "__file__", None)
            if path:
                trusted.add(os.path.dirname(os.path.dirname(path)))
        self.trusted = tuple(p.rstrip("/") + "/" for p in trusted if p and p != "/")
        self._seen: dict[str, str | None] = {}

    def problem(self, filename: str | None) -> str | None:
        """Why code from ``filename`` may not act as test machinery, or None."""
        if not filename or filename.startswith("<"):
            return "is not code from a source file"
        if filename not in self._seen:
            self._seen[filename] = self._problem(filename)
        return self._seen[filename]

    def _problem(self, filename: str) -> str | None:
        path = os.path.realpath(filename)
        if path in self.own:
            return None
        rel = os.path.relpath(path, self.root)
        if not rel.startswith(".."):
            if rel in self.changed:
                return f"comes from {rel}, which the graded diff changes"
            if rel not in self.before:
                return f"comes from {rel}, which appeared during the tests"
            return None
        if path.startswith(self.trusted):
            return None
        return f"comes from {path}, outside the system's folders"

    def value_problem(self, value: object) -> str | None:
        """Why ``value`` (a function, class, descriptor, ...) may not act as test machinery."""
        if value is _MISSING:
            return "was removed"
        files = _files_of(value)
        if files is None:
            return "is not code from a source file"
        for filename in files:
            why = self.problem(filename)
            if why is not None:
                return why
        return None


def _files_of(value: object) -> list[str] | None:
    """The source files of the code in ``value``; None for a callable with no Python code."""
    if isinstance(value, property):
        found: list[str] = []
        for accessor in (value.fget, value.fset, value.fdel):
            files = [] if accessor is None else _files_of(accessor)
            if files is None:
                return None
            found += files
        return found
    if isinstance(value, type) or type(value) is type(sys):
        module = value if type(value) is type(sys) else sys.modules.get(value.__module__)
        path = getattr(module, "__file__", None)
        return [path] if path else None
    func = getattr(value, "__func__", value)
    code = getattr(func, "__code__", None)
    if code is not None:
        return [code.co_filename]
    return None if callable(value) or hasattr(value, "__get__") else []


def _inner(value: object) -> tuple[object, object, object]:
    """The function inside ``value`` (itself, a method's or a property's getter) with its code
    and defaults: what could be swapped without replacing ``value``."""
    if isinstance(value, property):
        value = value.fget
    func = getattr(value, "__func__", value)
    code = getattr(func, "__code__", None)
    if code is None:
        return None, None, None
    return func, code, getattr(func, "__defaults__", None)


def _watched(value: object) -> bool:
    return callable(value) or isinstance(value, (property, classmethod, staticmethod, type(sys)))


class Guard:
    """The test machinery as it was before any code of the repository ran.

    Entries are ``(where, namespace, key, value, func, code, defaults)``: a name in a module's
    or class's namespace, what it held, and the function inside it with its code and defaults.
    ``check`` reports each entry replaced (or whose code was swapped) and each attribute added
    to a class, by code that ``Origins`` does not trust; replaced modules; and trace or profile
    functions left set.
    """

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.hot: list[_Entry] = []
        self.classes: list[tuple[str, type, frozenset[str], bool]] = []
        self.modules: dict[str, object] = {}
        self.hooks: dict[str, list[object]] = {
            "meta_path": list(sys.meta_path),
            "path_hooks": list(sys.path_hooks),
        }

    @classmethod
    def take(cls, names: list[str]) -> Guard:
        guard = cls()
        for name in names:
            module = sys.modules.get(name)
            if module is not None:
                guard._add_module(name, module)
        return guard

    def _add_module(self, name: str, module: object) -> None:
        self.modules[name] = module
        hot = name in HOT
        space = vars(module)
        for key, value in list(space.items()):
            if not _watched(value):
                continue
            self._add(name, space, key, value, hot)
            own = getattr(value, "__module__", None) == name and name != "builtins"
            if isinstance(value, type) and own:
                self._add_class(f"{name}.{key}", value, hot)

    def _add_class(self, where: str, klass: type, hot: bool) -> None:
        self.classes.append((where, klass, frozenset(vars(klass)), hot))
        for key, value in list(vars(klass).items()):
            if _watched(value) and not isinstance(value, type):
                self._add(where, vars(klass), key, value, hot)

    def _add(self, where: str, space: object, key: str, value: object, hot: bool) -> None:
        entry = (where, space, key, value, *_inner(value))
        self.entries.append(entry)
        if hot:
            self.hot.append(entry)

    def check(self, origins: Origins, hot_only: bool = False) -> list[str]:
        """What changed, as sentences; only the reporting path's modules when ``hot_only`` (and
        then a class is looked into only when its number of attributes changed)."""
        problems = []
        for where, space, key, value, func, code, defaults in (
            self.hot if hot_only else self.entries
        ):
            now = space.get(key, _MISSING)
            if now is value and (
                func is None or (func.__code__ is code and func.__defaults__ is defaults)
            ):
                continue
            why = origins.value_problem(now) if now is not value else "had its code swapped"
            if why is not None:
                problems.append(f"{where}.{key} was changed during the tests: it {why}")
        for where, klass, keys, hot in self.classes:
            if (hot or not hot_only) and len(vars(klass)) != len(keys):
                problems += _added(where, klass, keys, origins)
        for name, module in self.modules.items():
            if name != "__main__" and sys.modules.get(name) is not module:
                problems.append(f"sys.modules[{name!r}] was replaced during the tests")
        if sys.gettrace() is not None or sys.getprofile() is not None:
            problems.append("a trace or profile function was set during the tests")
        return problems + self._import_hooks(origins)

    def _import_hooks(self, origins: Origins) -> list[str]:
        """Import hooks added since ``take`` by code ``origins`` does not trust."""
        problems = []
        for name, before in self.hooks.items():
            for hook in getattr(sys, name):
                if any(hook is old for old in before):
                    continue
                why = origins.value_problem(hook if callable(hook) else type(hook))
                if why is not None:
                    problems.append(f"an import hook was added to sys.{name}: it {why}")
        return problems


def _added(where: str, klass: type, keys: frozenset[str], origins: Origins) -> list[str]:
    problems = []
    for key in frozenset(vars(klass)) - keys:
        value = vars(klass)[key]
        why = origins.value_problem(value) if _watched(value) else None
        if why is None and hasattr(value, "__get__") and not _watched(value):
            why = "is a descriptor"
        if why is not None:
            problems.append(f"{where}.{key} was added during the tests: it {why}")
    return problems


class Hooks:
    """The reporting hooks of a pytest run: ``problems`` names each hook caller replaced since
    ``Hooks`` was made, and each implementation whose code ``origins`` does not trust (each
    implementation is judged once)."""

    def __init__(self, pluginmanager: object, origins: Origins) -> None:
        self.relay = vars(pluginmanager.hook)  # type: ignore[attr-defined]
        self.callers = {name: self.relay[name] for name in REPORT_HOOKS if name in self.relay}
        self.origins = origins
        self.judged: dict[int, tuple[object, str | None]] = {}  # id -> (function, why)

    def problems(self) -> list[str]:
        problems = []
        for name, caller in self.callers.items():
            now = self.relay.get(name)
            if now is not caller:
                problems.append(f"pytest's {name} hook caller was replaced")
                continue
            for impl in caller.get_hookimpls():  # type: ignore[union-attr]
                why = self._judge(impl.function)
                if why is not None:
                    what = getattr(impl.function, "__qualname__", repr(impl.function))
                    problems.append(f"a {name} hook implementation ({what}) {why}")
        return problems

    def _judge(self, function: object) -> str | None:
        known = self.judged.get(id(function))
        if known is None or known[0] is not function:
            known = self.judged[id(function)] = (function, self.origins.value_problem(function))
        return known[1]


def report_problems(report: object, report_class: type) -> list[str]:
    """What makes ``report`` something pytest's own reporting could not have produced."""
    problems = []
    if type(report) is not report_class:
        problems.append(f"a test report is a {type(report).__name__}, not pytest's TestReport")
    fields = [getattr(report, name, None) for name in ("nodeid", "when", "outcome")]
    if any(type(value) is not str for value in fields):
        problems.append("a test report's nodeid, when or outcome is not a plain string")
    outcome, longrepr = fields[2], getattr(report, "longrepr", None)
    if outcome not in _OUTCOMES or (outcome == "passed") != (longrepr is None):
        problems.append(f"a test report says {outcome!r} with failure details {longrepr!r:.80}")
    return problems


def file_states(root: str) -> dict[str, tuple[int, ...]]:
    """Each file under ``root`` (not ``.git``): inode, size, mtime, ctime (which no process
    of the sandbox's user can set back) and mode."""
    states: dict[str, tuple[int, ...]] = {}
    for folder, dirs, files in os.walk(root):
        if folder == root:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            rel = os.path.relpath(path, root)
            states[rel] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    return states


def file_problems(before: dict, after: dict, watched: set[str]) -> list[str]:  # type: ignore[type-arg]
    """Code, configuration and test files the tests' processes created, changed or removed."""
    problems = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) == after.get(rel):
            continue
        name = os.path.basename(rel)
        code = name.endswith(_CODE_SUFFIXES) or "__pycache__" in rel.split(os.sep)
        if code or rel in watched:
            what = "created" if rel not in before else "removed" if rel not in after else "changed"
            problems.append(f"the tests' processes {what} {rel}")
    return problems


_UNSET = object()
_BOUND_TO_CODE = (type, type(os), type(file_states), type(len), staticmethod, classmethod,
                  property)  # fmt: skip


class Bindings:
    """The names graded test modules bound at import: what each imported (``imported_names``)
    and each function, class or module in its namespace. ``problems`` puts back every name
    rebound since (the agent's code reaching into a test module) and names each one."""

    def __init__(self) -> None:
        self.modules: dict[str, tuple[dict, dict, dict]] = {}  # type: ignore[type-arg]

    def note(self, path: str, module: object) -> bool:
        """Note the module at ``path`` (once); whether it was new."""
        if path in self.modules:
            return False
        space = vars(module)
        code = {k: v for k, v in space.items() if isinstance(v, _BOUND_TO_CODE)}
        self.modules[path] = (space, code, imported_names(path, space))
        return True

    def problems(self) -> list[str]:
        found = []
        for path, (space, code, imported) in self.modules.items():
            where = os.path.relpath(path)
            for key, (module, attr) in imported.items():
                value = held(module, attr)
                if value is not _UNSET and space.get(key) is not value:
                    space[key] = value
                    found.append(f"{where}: the name {key!r} the test module imported was "
                                 "rebound to something its module does not hold")  # fmt: skip
            for key, value in code.items():
                if key not in imported and space.get(key, _UNSET) is not value:
                    space[key] = value
                    found.append(f"{where}: the test module's name {key!r} was rebound "
                                 "after the module was collected")  # fmt: skip
        return found


def held(module: str, attr: str | None) -> object:
    """What ``module`` holds under ``attr`` (the module itself for None), or ``_UNSET``."""
    found = sys.modules.get(module, _UNSET)
    return found if attr is None or found is _UNSET else getattr(found, attr, _UNSET)


def imported_names(path: str, space: dict) -> dict[str, tuple[str, str | None]]:  # type: ignore[type-arg]
    """The names the module at ``path`` binds with a top-level ``import`` and nothing else at
    its top level: name -> (module, attribute; None for the module itself). Read from the file
    (which the supervisor checks is unchanged), never from the module."""
    import ast
    import importlib.util

    tree = _parsed(path)
    names: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    names[top] = (top, None)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            try:
                module = importlib.util.resolve_name(
                    "." * node.level + (node.module or ""), space.get("__package__")
                )
            except (ImportError, ValueError):
                continue
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = (module, alias.name)
    for name in _assigned(tree):
        names.pop(name, None)
    return names


def _parsed(path: str) -> Any:
    import ast

    try:
        with open(path, "rb") as source:
            return ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return ast.Module([], [])


def _assigned(tree: object) -> set[str]:
    """Names the module's statements other than imports bind (or their functions do)."""
    import ast

    found = set()
    for node in tree.body:  # type: ignore[attr-defined]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                found.add(inner.id)
            elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(inner.name)
    return found
