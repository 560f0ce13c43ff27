from minitmpl.lexer import Token, tokenize


def test_tokens_and_lines():
    assert tokenize("a\n{{ x }}{% if y %}{# c #}b") == [
        Token("text", "a\n", 1),
        Token("var", "x", 2),
        Token("block", "if y", 2),
        Token("text", "b", 2),
    ]


def test_plain_text():
    assert tokenize("no tags") == [Token("text", "no tags", 1)]
