import pytest

from textkit import camel_case, kebab_case, pascal_case, snake_case, split_words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("userName", ["user", "Name"]),
        ("UserName", ["User", "Name"]),
        ("user_name", ["user", "name"]),
        ("user-name", ["user", "name"]),
        ("user name", ["user", "name"]),
    ],
    ids=["camel", "pascal", "snake", "kebab", "spaces"],
)
def test_split_words(text, words):
    assert split_words(text) == words


def test_conversions():
    assert snake_case("createdAt") == "created_at"
    assert kebab_case("CreatedAt") == "created-at"
    assert camel_case("created_at") == "createdAt"
    assert pascal_case("created-at") == "CreatedAt"


def test_empty_text():
    assert snake_case("") == ""
    assert camel_case("") == ""


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("HTTPServerError", ["HTTP", "Server", "Error"]),
        ("parseXMLFile", ["parse", "XML", "File"]),
        ("getID", ["get", "ID"]),
        ("IOError", ["IO", "Error"]),
    ],
    ids=["leading", "middle", "trailing", "short"],
)
def test_split_words_keeps_acronyms_together(text, words):
    assert split_words(text) == words


def test_acronym_conversions():
    assert snake_case("HTTPServerError") == "http_server_error"
    assert kebab_case("parseXMLFile") == "parse-xml-file"
    assert camel_case("XML_parser") == "xmlParser"
