from textkit import char_width, display_width


def test_ascii_is_one_column_per_character():
    assert display_width("hello") == 5


def test_wide_characters_take_two_columns():
    assert char_width("日") == 2
    assert char_width("Ａ") == 2
    assert display_width("日本語") == 6


def test_combining_marks_take_none():
    assert display_width("e\u0301") == 1
    assert char_width("\u200b") == 0
