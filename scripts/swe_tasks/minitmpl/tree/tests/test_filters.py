import pytest

from minitmpl import Markup, Template, TemplateSyntaxError, UndefinedError, escape


def render(source, **context):
    return Template(source).render(**context)


def test_simple_filters():
    assert render("{{ name|upper }} {{ name|title }} {{ xs|length }}", name="ada x", xs=[1]) == (
        "ADA X Ada X 1"
    )


def test_filter_chain_and_arguments():
    assert render("{{ xs|join('-')|upper }}", xs=["a", "b"]) == "A-B"
    assert render("{{ text|truncate(5) }}", text="abcdefgh") == "ab..."


def test_default():
    assert render("{{ missing|default('n/a') }}") == "n/a"
    assert render("{{ x|default('n/a') }}", x=None) == "n/a"
    assert render("{{ x|default('n/a') }}", x=0) == "0"


def test_unknown_filter():
    with pytest.raises(TemplateSyntaxError, match="unknown filter"):
        Template("{{ x|frobnicate }}")


def test_custom_filters():
    template = Template("{{ x|double }}", filters={"double": lambda v: v * 2})
    assert template.render(x=21) == "42"


def test_values_are_escaped():
    assert render("<p>{{ x }}</p>", x="<b>") == "<p>&lt;b&gt;</p>"
    assert render("{{ x }}", x='"') == "&quot;"


def test_safe_and_autoescape_off():
    assert render("{{ x|safe }}", x="<b>") == "<b>"
    assert Template("{{ x }}", autoescape=False).render(x="<b>") == "<b>"


def test_markup_is_not_escaped_twice():
    assert escape(Markup("<b>")) == "<b>"
    assert render("{{ x|escape }}", x="<i>") == "&lt;i&gt;"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Fish & Chips", "Fish &amp; Chips"),
        ("<a href='x'>", "&lt;a href=&#39;x&#39;&gt;"),
        ("1 < 2 && 3 > 2", "1 &lt; 2 &amp;&amp; 3 &gt; 2"),
    ],
    ids=["ampersand", "tag", "mixed"],
)
def test_escape(value, expected):
    assert escape(value) == expected
    assert render("{{ x }}", x=value) == expected


def test_single_quoted_attributes_are_safe():
    source = "<a title='{{ title }}'>"
    assert render(source, title="x' onmouseover='alert(1)") == (
        "<a title='x&#39; onmouseover=&#39;alert(1)'>"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ xs|join(', ') }}", "a, b"),
        ("{{ missing|default('a|b') }}", "a|b"),
        ("{{ missing|default('}}') }}", "}}"),
        ('{{ xs|join(" | ") }}', "a | b"),
    ],
    ids=["comma", "pipe", "closing-braces", "double-quotes"],
)
def test_string_arguments_may_contain_delimiters(source, expected):
    assert render(source, xs=["a", "b"]) == expected


def test_default_for_missing_attributes_and_keys():
    assert render("{{ user.nickname|default('anon') }}", user={"name": "Ada"}) == "anon"
    assert render("{{ user.address.city|default('?') }}", user={}) == "?"


def test_if_on_a_missing_attribute_is_false():
    assert render("{% if user.admin %}admin{% else %}user{% endif %}", user={}) == "user"


def test_printing_a_missing_attribute_is_still_an_error():
    with pytest.raises(UndefinedError, match="'user.nickname'"):
        render("{{ user.nickname }}", user={})
