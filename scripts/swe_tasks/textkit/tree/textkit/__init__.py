"""textkit: slugs, naming styles, truncation, padding and wrapping by display width."""

from .case import camel_case, kebab_case, pascal_case, snake_case, split_words
from .slug import slugify
from .truncate import pad, truncate
from .width import char_width, display_width
from .wrap import fill, wrap

__version__ = "0.2.0"

__all__ = [
    "camel_case",
    "char_width",
    "display_width",
    "fill",
    "kebab_case",
    "pad",
    "pascal_case",
    "slugify",
    "snake_case",
    "split_words",
    "truncate",
    "wrap",
]
