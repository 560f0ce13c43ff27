"""A small real-looking repository for the synthesis tests: package ``textops`` with a pytest
suite of 11 tests, one of which always fails and one of which is flaky (it passes on its first
run in a checkout and fails on the next), so both must be left out of the baseline."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import git

TEXT = '''"""Small text helpers."""


def slugify(text, sep="-"):
    """Lower-case words of ``text`` joined by ``sep``."""
    words = []
    for word in text.split():
        cleaned = "".join(ch for ch in word if ch.isalnum())
        if cleaned:
            words.append(cleaned.lower())
    return sep.join(words)


def truncate(text, width, suffix="..."):
    if len(text) <= width:
        return text
    return text[: width - len(suffix)] + suffix


def count_words(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts
'''
NUMBERS = """def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def chunks(items, size):
    if size <= 0:
        raise ValueError("size must be positive")
    return [items[i : i + size] for i in range(0, len(items), size)]


class Stats:
    def __init__(self, values):
        self.values = list(values)

    def mean(self):
        return sum(self.values) / len(self.values)

    def spread(self):
        return max(self.values) - min(self.values)
"""
TEST_TEXT = """from textops.text import count_words, slugify, truncate


def test_slugify_words():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_separator():
    assert slugify("a b  c", sep="_") == "a_b_c"


def test_truncate_long():
    assert truncate("abcdefghij", 6) == "abc..."


def test_truncate_short():
    assert truncate("abc", 6) == "abc"


def test_count_words():
    assert count_words("a b A c") == {"a": 2, "b": 1, "c": 1}
"""
TEST_NUMBERS = """import os
import unittest

from textops.numbers import Stats, chunks, clamp


def test_clamp_inside():
    assert clamp(2, 0, 3) == 2


def test_clamp_edges():
    assert clamp(-1, 0, 3) == 0
    assert clamp(9, 0, 3) == 3


def test_chunks():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_clamp_known_failure():
    assert clamp(5, 0, 3) == 4


def test_flaky_cache():
    first = not os.path.exists(".flaky-marker")
    open(".flaky-marker", "w").close()
    assert first


class StatsTest(unittest.TestCase):
    def test_mean_and_spread(self):
        stats = Stats([1, 2, 6])
        self.assertEqual(stats.mean(), 3)
        self.assertEqual(stats.spread(), 5)
"""
STABLE = 9  # 11 tests, less the failing and the flaky one


def build_textops(root: Path) -> Path:
    """The ``textops`` repository (one commit) under ``root``; returns its folder."""
    repo = root / "textops"
    (repo / "textops").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "textops" / "__init__.py").write_text("")
    (repo / "textops" / "text.py").write_text(TEXT)
    (repo / "textops" / "numbers.py").write_text(NUMBERS)
    (repo / "tests" / "test_text.py").write_text(TEST_TEXT)
    (repo / "tests" / "test_numbers.py").write_text(TEST_NUMBERS)
    (repo / ".gitignore").write_text(".flaky-marker\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "textops")
    subprocess.run(["git", "-C", str(repo), "tag", "v1"], check=True)
    return repo
