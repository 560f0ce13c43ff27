"""slugify(): URL-friendly ASCII identifiers from any text."""

from __future__ import annotations

import re
import unicodedata

_NON_WORD = re.compile(r"[^a-zA-Z0-9]+")
# Letters that NFKD does not decompose into ASCII.
_REPLACEMENTS = {"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L"}


def slugify(
    text: str, separator: str = "-", max_length: int | None = None, lowercase: bool = True
) -> str:
    """Turn "Crème Brûlée & Co." into "creme-brulee-co".

    Accents are dropped, every run of other characters becomes one ``separator``, and the
    result never starts or ends with it, also when ``max_length`` cuts it short.
    """
    for char, replacement in _REPLACEMENTS.items():
        text = text.replace(char, replacement)
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NON_WORD.sub(separator, ascii_text).strip(separator)
    if lowercase:
        slug = slug.lower()
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug
