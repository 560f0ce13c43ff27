import pytest

from inikit import ParseError
from inikit.parser import DEFAULT_SECTION, parse


def values(text: str, section: str = "s") -> dict[str, str]:
    return {key: entry.value for key, entry in parse(text)[section].entries.items()}


def test_sections_and_options_keep_file_order():
    sections = parse("[b]\nx = 1\ny = 2\n[a]\nz = 3\n")
    assert list(sections) == [DEFAULT_SECTION, "b", "a"]
    assert list(sections["b"].entries) == ["x", "y"]
    assert sections["a"].lineno == 4


def test_colon_separator_and_surrounding_spaces():
    assert values("[s]\nname:   Ada  \nlang = python\n") == {"name": "Ada", "lang": "python"}


def test_empty_value():
    assert values("[s]\nempty =\n") == {"empty": ""}


def test_comment_lines_are_skipped():
    assert values("# top\n[s]\n; note\nx = 1\n  # indented comment\n") == {"x": "1"}


def test_option_names_are_lowercased():
    assert values("[s]\nMaxRetries = 3\n") == {"maxretries": "3"}


def test_continuation_lines_join_with_newlines():
    text = "[s]\nhosts = alpha\n    beta\n    gamma\nnext = 1\n"
    assert values(text) == {"hosts": "alpha\nbeta\ngamma", "next": "1"}


def test_value_may_start_on_a_continuation_line():
    assert values("[s]\nbody =\n    first\n    second\n") == {"body": "first\nsecond"}


def test_blank_line_ends_a_continuation():
    text = "[s]\nhosts = alpha\n\n  other = 2\n"
    assert values(text) == {"hosts": "alpha", "other": "2"}


def test_quoted_value_keeps_surrounding_spaces():
    assert values('[s]\npad = "  two words  "\n') == {"pad": "  two words  "}


def test_inline_comment_after_whitespace_is_dropped():
    assert values("[s]\nport = 8080  # default port\nhost = db ; primary\n") == {
        "port": "8080",
        "host": "db",
    }


def test_options_before_any_section_go_to_default():
    assert values("x = 1\n[s]\n", DEFAULT_SECTION) == {"x": "1"}


def test_repeated_option_is_an_error_naming_the_line():
    with pytest.raises(ParseError) as caught:
        parse("[s]\nx = 1\nX = 2\n")
    assert caught.value.lineno == 3


def test_repeated_section_is_an_error():
    with pytest.raises(ParseError, match="already defined"):
        parse("[s]\n[t]\n[s]\n")


def test_line_that_is_not_ini_is_an_error():
    with pytest.raises(ParseError, match="line 2"):
        parse("[s]\njust some words\n")


def test_hash_without_whitespace_before_it_is_part_of_the_value():
    text = "[s]\nurl = https://example.com/docs#install\nchannel = irc#python\n"
    assert values(text) == {"url": "https://example.com/docs#install", "channel": "irc#python"}


def test_comment_characters_inside_quotes_are_kept():
    text = '[s]\npassword = "p#ss; word"  ; not part of it\n'
    assert values(text) == {"password": "p#ss; word"}


def test_escapes_inside_quotes():
    text = '[s]\ngreeting = "say \\"hi\\" # twice"\npath = "C:\\\\temp"\ntabbed = "a\\tb"\n'
    assert values(text) == {"greeting": 'say "hi" # twice', "path": "C:\\temp", "tabbed": "a\tb"}
