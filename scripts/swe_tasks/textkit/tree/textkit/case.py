"""Convert identifiers between naming styles: snake_case, kebab-case, camelCase, PascalCase."""

from __future__ import annotations

import re

# An acronym before a capitalised word ("HTTP" in "HTTPServer"), a word, an acronym, a number.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def split_words(text: str) -> list[str]:
    """The words of an identifier in any style: "HTTPServerError" -> ["HTTP", "Server",
    "Error"], "user-name" -> ["user", "name"]."""
    return _WORD.findall(text)


def snake_case(text: str) -> str:
    return "_".join(word.lower() for word in split_words(text))


def kebab_case(text: str) -> str:
    return "-".join(word.lower() for word in split_words(text))


def pascal_case(text: str) -> str:
    return "".join(word.capitalize() for word in split_words(text))


def camel_case(text: str) -> str:
    pascal = pascal_case(text)
    return pascal[:1].lower() + pascal[1:]
