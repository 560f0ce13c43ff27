import pytest

from textkit import pad, truncate


def test_short_text_is_returned_unchanged():
    assert truncate("hello", 5) == "hello"
    assert truncate("hello", 10) == "hello"


def test_words_mode_cuts_between_words():
    assert truncate("the quick brown fox", 14, words=True) == "the quick…"


def test_width_narrower_than_suffix_is_an_error():
    with pytest.raises(ValueError, match="narrower than the suffix"):
        truncate("hello", 2, suffix="...")


def test_pad_aligns():
    assert pad("ab", 5) == "ab   "
    assert pad("ab", 5, align="right") == "   ab"
    assert pad("ab", 5, align="center", fill="*") == "*ab**"
    assert pad("toolong", 3) == "toolong"


def test_pad_counts_wide_characters_twice():
    assert pad("日本", 6) == "日本  "


def test_pad_rejects_unknown_alignment():
    with pytest.raises(ValueError, match="align must be"):
        pad("x", 3, align="justify")


def test_words_mode_with_a_single_long_word():
    assert truncate("abcdefghijkl", 6, words=True) == "abcde…"


@pytest.mark.parametrize(
    ("text", "width", "suffix", "expected"),
    [
        ("hello world", 8, "…", "hello w…"),
        ("hello world", 8, "...", "hello..."),
        ("abcdef", 5, "", "abcde"),
    ],
    ids=["ellipsis", "dots", "no-suffix"],
)
def test_result_fits_in_width_including_the_suffix(text, width, suffix, expected):
    assert truncate(text, width, suffix) == expected
    assert len(truncate(text, width, suffix)) <= width


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("日本語のテキスト", 7, "日本語…"),
        ("日本語のテキスト", 8, "日本語…"),
        ("日本語", 6, "日本語"),
        ("ab日本", 5, "ab日…"),
    ],
    ids=["odd", "even", "fits", "mixed"],
)
def test_truncate_counts_wide_characters_twice(text, width, expected):
    assert truncate(text, width) == expected
