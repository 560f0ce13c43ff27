import pytest

from minitmpl import Template, TemplateSyntaxError, UndefinedError


def render(source, **context):
    return Template(source).render(**context)


def test_text_and_variables():
    assert render("Hello {{ name }}!", name="Ada") == "Hello Ada!"


def test_dotted_names_read_keys_attributes_and_indexes():
    class User:
        name = "Ada"

    assert render("{{ u.name }} {{ d.k }} {{ xs.1 }}", u=User(), d={"k": "v"}, xs=[1, 2]) == (
        "Ada v 2"
    )


def test_literals():
    assert render("{{ 'hi' }} {{ 42 }}") == "hi 42"


def test_comments_are_dropped():
    assert render("a{# note #}b") == "ab"


def test_if_else():
    source = "{% if user %}hi {{ user }}{% else %}who?{% endif %}"
    assert render(source, user="Ada") == "hi Ada"
    assert render(source, user="") == "who?"


def test_if_not():
    assert render("{% if not items %}empty{% endif %}", items=[]) == "empty"


def test_for_loop_and_loop_info():
    source = (
        "{% for x in xs %}{{ loop.index }}={{ x }}{% if not loop.last %},{% endif %}{% endfor %}"
    )
    assert render(source, xs=["a", "b", "c"]) == "1=a,2=b,3=c"


def test_for_else_on_empty():
    assert render("{% for x in xs %}{{ x }}{% else %}none{% endfor %}", xs=[]) == "none"


def test_printing_an_undefined_variable_is_an_error():
    with pytest.raises(UndefinedError, match="'missing'"):
        render("{{ missing }}")


def test_context_dict_and_keywords():
    assert Template("{{ a }}{{ b }}").render({"a": 1}, b=2) == "12"


@pytest.mark.parametrize(
    "source",
    ["{% if x %}", "{% for x in %}{% endfor %}", "{% endif %}", "{{ x", "{% bogus %}"],
    ids=["unclosed-if", "bad-for", "stray-end", "unclosed-var", "unknown-tag"],
)
def test_syntax_errors(source):
    with pytest.raises(TemplateSyntaxError):
        Template(source)


def test_mismatched_end_tag():
    with pytest.raises(TemplateSyntaxError, match="endfor closes"):
        Template("{% if x %}{% endfor %}")


def test_nested_loops_keep_the_outer_loop_info():
    source = (
        "{% for g in groups %}{{ g.name }}:{% for i in g.items %}{{ i }}{% endfor %}"
        "{% if not loop.last %}; {% endif %}{% endfor %}"
    )
    groups = [{"name": "a", "items": [1, 2]}, {"name": "b", "items": [3, 4, 5]}]
    assert render(source, groups=groups) == "a:12; b:345"


def test_loop_variable_does_not_leak():
    source = "{% for user in users %}{{ user }} {% endfor %}- {{ user }}"
    assert render(source, users=["bob", "eve"], user="ada") == "bob eve - ada"


def test_loop_is_undefined_after_the_loop():
    with pytest.raises(UndefinedError):
        render("{% for x in xs %}{% endfor %}{{ loop }}", xs=[1])
