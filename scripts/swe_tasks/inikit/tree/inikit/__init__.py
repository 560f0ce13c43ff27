"""inikit: read, query and write INI configuration files."""

from .config import Config, load, loads
from .errors import Error, InterpolationError, NoOptionError, NoSectionError, ParseError
from .writer import dump, dumps

__version__ = "0.3.0"

__all__ = [
    "Config",
    "Error",
    "InterpolationError",
    "NoOptionError",
    "NoSectionError",
    "ParseError",
    "dump",
    "dumps",
    "load",
    "loads",
]
