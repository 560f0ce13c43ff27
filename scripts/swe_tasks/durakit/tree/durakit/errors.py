"""The one exception durakit raises."""


class DurationError(ValueError):
    """Text that is not a duration; the message quotes it."""
