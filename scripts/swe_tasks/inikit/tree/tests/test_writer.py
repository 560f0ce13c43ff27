import io

import pytest

import inikit


def test_dumps_writes_sections_and_options():
    config = inikit.loads("[b]\nx = 1\n[a]\ny = two words\n")
    assert inikit.dumps(config) == "[b]\nx = 1\n\n[a]\ny = two words\n"


def test_default_section_is_written_first_when_it_has_options():
    config = inikit.loads("[s]\nx = 1\n")
    assert not inikit.dumps(config).startswith("[DEFAULT]")
    config = inikit.loads("[s]\nx = 1\n[DEFAULT]\nd = 2\n")
    assert inikit.dumps(config).startswith("[DEFAULT]\nd = 2\n\n[s]\n")


def test_multiline_values_use_continuation_lines():
    config = inikit.loads("[s]\n")
    config.set("s", "hosts", "alpha\nbeta")
    assert inikit.dumps(config) == "[s]\nhosts = alpha\n    beta\n"


def test_value_with_a_comment_character_is_quoted():
    config = inikit.loads("[s]\n")
    config.set("s", "motto", "a ; b")
    assert inikit.dumps(config) == '[s]\nmotto = "a ; b"\n'
    assert inikit.loads(inikit.dumps(config)).get("s", "motto") == "a ; b"


def test_dump_writes_to_a_stream():
    stream = io.StringIO()
    inikit.dump(inikit.loads("[s]\nx = 1\n"), stream)
    assert stream.getvalue() == "[s]\nx = 1\n"


def test_a_parsed_file_round_trips():
    text = "[DEFAULT]\nhome = /srv\n\n[s]\nname = app\nlogs = /var/${name}\nlist = a\n    b\n"
    config = inikit.loads(text)
    again = inikit.loads(inikit.dumps(config))
    assert dict(again.items("s")) == dict(config.items("s"))


@pytest.mark.parametrize(
    "value",
    ["  padded  ", '"quoted"', '5" display ; wide', "tab\tend\t", "back\\slash ; semi"],
    ids=["padded", "quoted", "inch-mark", "tab", "backslash"],
)
def test_values_round_trip(value):
    config = inikit.loads("[s]\n")
    config.set("s", "key", value)
    assert inikit.loads(inikit.dumps(config)).get("s", "key") == value


def test_quotes_inside_a_quoted_value_are_escaped():
    config = inikit.loads("[s]\n")
    config.set("s", "greeting", 'say "hi" ; loud')
    assert inikit.dumps(config) == '[s]\ngreeting = "say \\"hi\\" ; loud"\n'
