"""minitmpl: a small HTML template engine with variables, filters, if and for."""

from .errors import TemplateError, TemplateSyntaxError, UndefinedError
from .filters import FILTERS, Markup, escape
from .template import Template

__version__ = "0.2.0"

__all__ = [
    "FILTERS",
    "Markup",
    "Template",
    "TemplateError",
    "TemplateSyntaxError",
    "UndefinedError",
    "escape",
]
