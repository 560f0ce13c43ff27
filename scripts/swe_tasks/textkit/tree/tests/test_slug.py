import pytest

from textkit import slugify


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Hello, World!", "hello-world"),
        ("Crème Brûlée", "creme-brulee"),
        ("  spaces   everywhere  ", "spaces-everywhere"),
        ("Straße in Łódź", "strasse-in-lodz"),
        ("100% natural", "100-natural"),
        ("---", ""),
    ],
    ids=["punctuation", "accents", "spaces", "special-letters", "digits", "nothing-left"],
)
def test_slugify(text, slug):
    assert slugify(text) == slug


def test_separator_and_case():
    assert slugify("Hello World", separator="_") == "hello_world"
    assert slugify("Hello World", lowercase=False) == "Hello-World"


def test_max_length():
    assert slugify("abcdef", max_length=3) == "abc"
    assert slugify("short", max_length=50) == "short"


@pytest.mark.parametrize(
    ("max_length", "slug"),
    [(10, "hello-big"), (6, "hello"), (9, "hello-big"), (11, "hello-big-w")],
)
def test_max_length_never_ends_with_the_separator(max_length, slug):
    assert slugify("Hello big world", max_length=max_length) == slug


def test_max_length_with_a_custom_separator():
    assert slugify("Hello big world", separator="_", max_length=6) == "hello"
