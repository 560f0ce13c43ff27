import pytest

import inikit
from inikit import InterpolationError


def test_reference_in_the_same_section():
    config = inikit.loads("[s]\nroot = /srv\ndata = ${root}/data\n")
    assert config.get("s", "data") == "/srv/data"


def test_reference_to_another_section():
    config = inikit.loads("[db]\nhost = pg\nport = 5432\n[app]\ndsn = ${db:host}:${db:port}\n")
    assert config.get("app", "dsn") == "pg:5432"


def test_references_are_expanded_recursively():
    config = inikit.loads("[s]\na = x\nb = ${a}${a}\nc = ${b}-${b}\n")
    assert config.get("s", "c") == "xx-xx"


def test_double_dollar_is_a_literal_dollar():
    config = inikit.loads("[s]\nprice = $$5 and $${not_a_ref}\n")
    assert config.get("s", "price") == "$5 and ${not_a_ref}"


def test_raw_get_skips_interpolation():
    config = inikit.loads("[s]\na = 1\nb = ${a}\n")
    assert config.get("s", "b", raw=True) == "${a}"


def test_missing_reference_raises():
    config = inikit.loads("[s]\nb = ${nope}\n")
    with pytest.raises(InterpolationError, match="no option 'nope'"):
        config.get("s", "b")


def test_reference_to_a_missing_section_raises():
    config = inikit.loads("[s]\nb = ${other:x}\n")
    with pytest.raises(InterpolationError, match="other"):
        config.get("s", "b")


def test_reference_cycle_raises():
    config = inikit.loads("[s]\na = ${b}\nb = ${a}\n")
    with pytest.raises(InterpolationError, match="nest deeper"):
        config.get("s", "a")


def test_reference_names_are_case_insensitive():
    config = inikit.loads("[db]\nHost = pg\n[app]\nurl = ${DB:Host}\nlocal = ${URL}\n")
    with pytest.raises(InterpolationError):
        config.get("app", "url")
    config = inikit.loads("[db]\nHost = pg\n[app]\nurl = ${db:HOST}/x\nlocal = ${URL}\n")
    assert config.get("app", "local") == "pg/x"


def test_reference_sees_default_options():
    config = inikit.loads("[DEFAULT]\nhome = /srv\n[app]\nlogs = ${home}/logs\n")
    assert config.get("app", "logs") == "/srv/logs"
    assert dict(config.items("app")) == {"logs": "/srv/logs", "home": "/srv"}


def test_reference_to_a_default_option_through_another_section():
    config = inikit.loads("[DEFAULT]\nhome = /srv\n[db]\n[app]\nlogs = ${db:home}/logs\n")
    assert config.get("app", "logs") == "/srv/logs"
