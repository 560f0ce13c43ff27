import pytest

import inikit
from inikit import NoOptionError, NoSectionError

SAMPLE = """
[DEFAULT]
timeout = 30
debug = no

[server]
Host = 0.0.0.0
port = 8080
ratio = 0.75
debug = yes

[client]
retries = 3
"""


@pytest.fixture
def config():
    return inikit.loads(SAMPLE)


def test_sections_do_not_include_default(config):
    assert config.sections() == ["server", "client"]
    assert config.has_section("server")
    assert not config.has_section("missing")


def test_option_names_are_case_insensitive(config):
    assert config.get("server", "host") == "0.0.0.0"
    assert config.get("server", "HOST") == "0.0.0.0"


def test_section_names_are_case_sensitive(config):
    with pytest.raises(NoSectionError):
        config.get("Server", "host")


def test_default_options_are_inherited_and_overridable(config):
    assert config.get("client", "timeout") == "30"
    assert config.getboolean("client", "debug") is False
    assert config.getboolean("server", "debug") is True


def test_typed_getters(config):
    assert config.getint("server", "port") == 8080
    assert config.getfloat("server", "ratio") == 0.75
    with pytest.raises(ValueError, match="invalid literal"):
        config.getint("server", "host")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("yes", True), ("on", True), ("1", True), ("no", False), ("off", False), ("0", False)],
)
def test_getboolean_words(text, expected):
    assert inikit.loads(f"[s]\nflag = {text}\n").getboolean("s", "flag") is expected


def test_getboolean_rejects_other_words():
    with pytest.raises(ValueError, match="not a boolean: 'maybe'"):
        inikit.loads("[s]\nflag = maybe\n").getboolean("s", "flag")


def test_fallback_is_used_only_for_a_missing_option(config):
    assert config.get("client", "missing", fallback="x") == "x"
    assert config.getint("client", "missing", fallback=5) == 5
    assert config.getint("client", "retries", fallback=5) == 3
    with pytest.raises(NoOptionError, match="'missing' in section \\[client\\]"):
        config.get("client", "missing")


def test_missing_section_raises_even_with_a_fallback(config):
    with pytest.raises(NoSectionError):
        config.get("nowhere", "x", fallback="x")


def test_options_and_items_include_defaults(config):
    assert config.options("client") == ["retries", "timeout", "debug"]
    assert dict(config.items("client")) == {"retries": "3", "timeout": "30", "debug": "no"}


def test_set_add_section_and_remove_option(config):
    config.add_section("cache")
    config.set("cache", "Size", "64")
    assert config.getint("cache", "size") == 64
    assert config.remove_option("cache", "SIZE")
    assert not config.has_option("cache", "size")
    with pytest.raises(ValueError, match="already exists"):
        config.add_section("cache")


def test_load_reads_a_file(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[s]\nname = café\n", encoding="utf-8")
    assert inikit.load(path).get("s", "name") == "café"


def test_getlist_splits_on_commas_and_newlines():
    config = inikit.loads("[s]\nhosts = a, b,\n    c\n")
    assert config.getlist("s", "hosts") == ["a", "b", "c"]
    assert config.getlist("s", "missing", fallback=[]) == []


@pytest.mark.parametrize("text", ["True", "YES", "On"])
def test_getboolean_ignores_case(text):
    assert inikit.loads(f"[s]\nflag = {text}\n").getboolean("s", "flag") is True


def test_getboolean_ignores_case_for_false_words():
    config = inikit.loads("[s]\na = False\nb = OFF\n")
    assert config.getboolean("s", "a") is False
    assert config.getboolean("s", "b") is False
