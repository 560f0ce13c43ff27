"""minitmpl's exceptions."""


class TemplateError(Exception):
    """Base class of every minitmpl error."""


class TemplateSyntaxError(TemplateError):
    """The template text is malformed; the message names the line."""


class UndefinedError(TemplateError):
    """A variable that is not in the context was printed."""
