import pytest

from textkit import fill, wrap


def test_wrap_breaks_at_spaces():
    assert wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]


def test_long_word_gets_its_own_line():
    assert wrap("a verylongword b", 5) == ["a", "verylongword", "b"]


def test_newlines_start_new_lines():
    assert wrap("one two\nthree", 20) == ["one two", "three"]


def test_fill_joins_lines():
    assert fill("aa bb cc", 5) == "aa bb\ncc"


def test_width_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        wrap("x", 0)


def test_wrap_counts_wide_characters_twice():
    assert wrap("日本 語の テキスト", 8) == ["日本", "語の", "テキスト"]
    assert all(len(line) <= 4 for line in wrap("日本 語の テキスト", 8))
