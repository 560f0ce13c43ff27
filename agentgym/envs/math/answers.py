"""What a boxed answer states: the values it names, and notation that could hide another one.

math-verify reads LaTeX leniently: around a command it does not know it keeps only the last
expression (``3 \\lor 4``, ``3 \\star 4`` and ``3 \\text{ oder } 4`` all parse as 4), so a list
of forbidden separators is never complete. ``stated`` therefore reads a box the other way
round: it splits it into the values it states, at

- connectives: ``,``, ``;``, ``&``, ``\\lor``, ``\\vee``, ``\\land``, ``\\cup``, ``\\cap``,
  ``\\mid``, ``\\quad``, ``\\\\``, ... and the words ``or``, ``and``, ``either``, ...
  (bare or in ``\\text{}``); two numbers side by side (``3 \\; 4``);
- relations, unless the reference is itself an equation or inequality: ``=``, ``<``,
  ``\\le``, ``\\approx``, ``\\to``, ``\\Rightarrow``, ``\\in``, ...; a side that is only a
  name (``x``, ``a_1``, ``f(x)``) is the subject, not a value;
- the braces of a set written out (``\\{1, 2\\}``), and ``\\pm`` / ``\\mp`` (two values);

and reports as ``unclear`` any notation outside what it knows to be part of one value (an
unknown command, a connective inside brackets, a ``\\text{}`` followed by a number, an
unpaired ``|``), unless the reference uses it too. Tuples and intervals (``(1, 2)``,
``[2, 4)``) are one value each. ``canonical`` first writes the spellings of one value plainly
(thousands separators, percents, bases, sets in plain braces, doubled backslashes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Statement", "canonical", "numerals", "perturbations", "stated"]

MAX_VALUES = 16
_UNICODE = {
    "∨": r"\lor ", "∧": r"\land ", "∪": r"\cup ", "∩": r"\cap ", "±": r"\pm ", "∓": r"\mp ",
    "≈": r"\approx ", "≠": r"\neq ", "≤": r"\le ", "≥": r"\ge ", "→": r"\to ", "⇒": r"\Rightarrow ",
    "∈": r"\in ", "·": r"\cdot ", "×": r"\times ", "÷": r"\div ", "√": r"\sqrt ", "π": r"\pi ",
    "∞": r"\infty ", "°": r"^\circ ", "−": "-", "\u00a0": " ",
}  # fmt: skip
_TEXT = {
    "text", "textrm", "textup", "textnormal", "textbf", "textit", "texttt", "textsf", "mathrm",
    "mathit", "mathbf", "mathsf", "mathtt", "mbox", "hbox", "emph", "operatorname",
}  # fmt: skip
_DROP = {
    "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl",
    "biggr", "displaystyle", "textstyle", "limits", ",", ";", ":", "!", " ", "middle",
}  # fmt: skip
_CONNECTIVES = {
    "lor", "vee", "land", "wedge", "cup", "cap", "sqcup", "sqcap", "bigcup", "bigcap", "bigvee",
    "bigwedge", "uplus", "setminus", "mid", "vert", "Vert", "|", "quad", "qquad", "\\", "newline",
    "&", "hspace", "vspace", "hfill", "enspace", "or", "and",
}  # fmt: skip
_RELATIONS = {
    "approx", "equiv", "sim", "simeq", "cong", "neq", "ne", "le", "leq", "ge", "geq", "lt",
    "gt", "leqslant", "geqslant", "to", "rightarrow", "Rightarrow", "implies", "iff",
    "Leftrightarrow", "leftrightarrow", "longrightarrow", "Longrightarrow", "mapsto", "in",
    "ni", "notin", "subset", "subseteq", "supset", "supseteq", "propto", "colon",
}  # fmt: skip
_VALUE_COMMANDS = {
    "frac", "dfrac", "tfrac", "cfrac", "sqrt", "pi", "infty", "cdot", "times", "div", "circ",
    "degree", "%", "$", "log", "ln", "lg", "exp", "sin", "cos", "tan", "sec", "csc", "cot",
    "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "binom", "dbinom", "tbinom", "choose",
    "ell", "overline", "bar", "hat", "vec", "tilde", "boldsymbol", "mathbb", "mathcal",
    "lfloor", "rfloor", "lceil", "rceil", "langle", "rangle", "{", "}", "emptyset",
    "varnothing", "prime", "ast", "angle", "triangle", "sum", "prod", "int", "lim", "min",
    "max", "gcd", "lcm", "det", "deg", "arg", "pm", "mp", "begin", "end",
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
    "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon",
    "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi",
    "Sigma", "Phi", "Psi", "Omega",
}  # fmt: skip
_WORDS = {  # connective words, in text or bare: each one separates two values
    "or", "and", "either", "nor", "xor", "not", "but", "also", "maybe", "perhaps", "possibly",
    "probably", "likely", "else", "otherwise", "resp", "respectively", "ie", "eg", "vs",
    "versus", "alternatively", "if", "then", "to", "through", "until", "till", "between",
    "both", "except", "unless", "oder", "ou", "o", "oppure", "bzw", "und", "et", "y",
}  # fmt: skip
_BARE_WORDS = {  # the connective words that are never a product of variables
    "or", "and", "either", "nor", "xor", "oder", "und", "bzw", "resp", "respectively",
    "otherwise", "maybe", "perhaps", "possibly", "probably", "versus", "vs", "alternatively",
    "else", "not", "but", "also", "until", "between", "through", "unless", "except", "both",
}  # fmt: skip
_TWO_ARGUMENTS = {r"\frac", r"\cfrac", r"\binom", r"\dbinom", r"\tbinom"}
_CONSTANTS = {r"\pi", r"\infty", "e", "i", r"\emptyset", r"\varnothing"}
_FUNCTIONS = {"sin", "cos", "tan", "sec", "csc", "cot", "log", "ln", "exp", "max", "min", "gcd",
              "lcm", "mod", "deg", "det", "arg", "sqrt", "arcsin", "arccos", "arctan"}  # fmt: skip
_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\.\d+|[A-Za-z]+|\s+|.", re.DOTALL)
_NAME = r"(?:m\s*)?(?:\\angle\s*)?(?:\\?[A-Za-z]+)(?:\s*_\s*\{?\s*\w+\s*\}?)?'*"
_SUBJECT = re.compile(rf"{_NAME}(?:\s*\([^()]*\))?|\(\s*{_NAME}(?:\s*,\s*{_NAME})+\s*\)")
_COMMAND_END = re.compile(r"\\[A-Za-z]+$")
_BOUND = re.compile(
    r"\\(?:sum|prod|lim|bigcup|bigcap|min|max)\s*_\s*\{\s*([A-Za-z])\s*(?:=|\\to|\\in|\\rightarrow)"
)
_INTEGRAL = re.compile(r"\\int.*?(?:\\,|\s|\\!|\})\s*(?:\\mathrm\{d\}|d)\s*([A-Za-z])(?![A-Za-z])")
_SIGNS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")
_OPEN, _CLOSE = {"{", "(", "[", r"\{", r"\begin"}, {"}", ")", "]", r"\}", r"\end"}


@dataclass
class _Token:
    kind: str  # num, word, cmd, text, open, close, sep, rel, bar, op, other
    text: str
    depth: int = 0


@dataclass
class Statement:
    """The values a box states, and what in it is unclear."""

    values: list[str] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)
    """Notation that could hide another value (the reference's own vocabulary excepted)."""
    relation: bool = False
    """Whether a relation (``=``, ``<``, ``\\in``, ...) joins two values (not a name and a
    value, as in ``x = 3``): the box is an equation or an inequality."""
    vocabulary: set[str] = field(default_factory=set)
    """Every command, word and symbol the box uses."""


def stated(box: str, *, allowed: set[str] | None = None, relations: bool = True) -> Statement:
    """The values ``box`` states; ``allowed`` is notation not to report as unclear (the
    reference's vocabulary); with ``relations`` False, ``=``, ``<``, ... do not split values."""
    tokens = _tokens(_normalise(box))
    result = Statement(vocabulary={t.text.strip() for t in tokens})
    allowed = allowed or set()
    result.unclear = [t.text for t in _unclear(tokens) if t.text.strip() not in allowed]
    for clause in _split(tokens, {"sep"}):
        sides = _without_subjects(_split(clause, {"rel"}, sets=False) if relations else [clause])
        result.relation |= len(sides) > 1
        parts = [part for side in sides for part in _split(side, set())]
        result.values += [value for part in parts for value in _expand(part)]
    return result


def _normalise(box: str) -> str:
    text = canonical(box).replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac")
    return "".join(_UNICODE.get(c, c) for c in text)


def canonical(box: str) -> str:
    """``box`` with the spellings of one value made plain (what is compared, here and by
    math-verify): a doubled backslash before a command (``\\\\frac``, escaped twice),
    thousands separators (``1,000``, ``1{,}000``, ``1,\\!000``, ``1\\,000``, ``1~000``; a plain
    comma only outside brackets, so ``(12,102)`` stays an interval), ``35.0\\%`` (``35\\%``),
    ``28 percent``, a number in a base (``204_5`` is 54), a set in plain braces
    (``{1, 2}`` is ``\\{1, 2\\}``) and named solutions (``p=5,q=2;p=7,q=2`` is
    ``(5,2),(7,2)``)."""
    text = box.strip().strip("$").strip()
    text = _ESCAPED.sub(r"\\", text)
    text = _named_tuples(text)
    text = _THOUSANDS.sub("", _plain_sets(text))
    text = _plain_thousands(text)
    text = _PERCENT_WORD.sub(r"\1\\%", text)
    text = _DECIMAL_PERCENT.sub(_percent, text)
    return _BASE.sub(_in_base, text)


_KNOWN = sorted(_VALUE_COMMANDS | _DROP | _RELATIONS | _TEXT | _CONNECTIVES, key=len, reverse=True)
_ESCAPED = re.compile(
    r"(?<!\\)\\\\(?=(?:" + "|".join(n for n in _KNOWN if n.isalpha()) + r")(?![A-Za-z]))"
)
_THOUSANDS = re.compile(r"(?<=\d)(?: |\{,\}|,\s*\\!\s*|\\,|\\!|~|\\ )(?=\d{3}(?!\d))")
_PERCENT_WORD = re.compile(r"(\d(?:\.\d+)?)\s*(?:\\text\{\s*)?(?:percent(?:age)?|pct)\b\}?")
_DECIMAL_PERCENT = re.compile(r"(?<![\d.])(\d+)\.(\d+)\s*\\?%")
_BASE = re.compile(r"(?<![\w\\.^{])(\d+)_(?:\{(\d{1,2})\}|(\d))(?![\d}^])")


def _percent(match: re.Match[str]) -> str:
    """``35.0\\%`` as ``35\\%`` (math-verify takes only whole percents); ``35.5\\%`` as 35.5."""
    fraction = match.group(2).rstrip("0")
    return f"{match.group(1)}\\%" if not fraction else f"{match.group(1)}.{fraction}"


_ASSIGNMENT = re.compile(r"\s*([A-Za-z])\s*=\s*([^,;=]+?)\s*")


def _named_tuples(text: str) -> str:
    """Solutions written as named values, one per ``;``-separated group (``p=5,q=2;p=7,q=2``),
    as tuples with the names in alphabetical order (``(5,2),(7,2)``)."""
    groups = text.split(";")
    if len(groups) < 2:
        return text
    tuples, names = [], None
    for group in groups:
        pairs = [_ASSIGNMENT.fullmatch(part) for part in group.split(",")]
        if not all(pairs) or len(pairs) < 2:
            return text
        values = {m.group(1): m.group(2) for m in pairs if m}
        names = names or sorted(values)
        if len(values) != len(pairs) or set(values) != set(names):
            return text
        tuples.append("(" + ",".join(values[n] for n in names) + ")")
    return ",".join(tuples)


def numerals(text: str) -> list[tuple[str, int]]:
    """The numbers ``text`` writes in a base other than 10 (``204_5``: ``("204", 5)``), sorted:
    an answer must use the reference's base (``54`` does not answer "write 54 in base 5")."""
    found = []
    for match in _BASE.finditer(text):
        if _in_base(match) != match.group():
            found.append((match.group(1), int(match.group(2) or match.group(3))))
    return sorted(n for n in found if n[1] != 10)


def _in_base(match: re.Match[str]) -> str:
    digits, base = match.group(1), int(match.group(2) or match.group(3))
    if not 2 <= base <= 10 or any(int(d) >= base for d in digits):
        return match.group()
    return str(int(digits, base))


def _plain_thousands(text: str) -> str:
    """``1,000`` as 1000, where no bracket of a tuple, interval or set encloses the comma."""
    out, stack = [], []
    for i, char in enumerate(text):
        if char in "([{":
            stack.append("set" if text[i - 1 : i] == "\\" else char)
        elif char in ")]}" and stack:
            stack.pop()
        elif char == "," and _thousands_comma(text, i) and not {"(", "[", "set"} & set(stack):
            continue
        out.append(char)
    return "".join(out)


def _thousands_comma(text: str, i: int) -> bool:
    return text[i - 1 : i].isdigit() and bool(re.match(r"\d{3}(?!\d)", text[i + 1 :]))


def _plain_sets(text: str) -> str:
    """A brace group that opens the box, or follows ``=`` or ``\\in``, and holds a comma at its
    own level: a set (``{1, 2}``), as ``\\{1, 2\\}``."""
    for match in reversed(list(re.finditer(r"(?:^|=|\\in(?![A-Za-z]))\s*\{", text))):
        start, depth = match.end() - 1, 0
        for j in range(start, len(text)):
            if text[j] == "{" and text[j - 1 : j] != "\\":
                depth += 1
            elif text[j] == "}" and text[j - 1 : j] != "\\":
                depth -= 1
                if depth == 0:
                    inner = text[start + 1 : j]
                    if _has_top_comma(inner):
                        text = text[:start] + r"\{" + inner + r"\}" + text[j + 1 :]
                    break
    return text


def _has_top_comma(text: str) -> bool:
    depth = 0
    for i, char in enumerate(text):
        depth += {"{": 1, "(": 1, "[": 1, "}": -1, ")": -1, "]": -1}.get(char, 0)
        if char == "," and depth == 0 and not _thousands_comma(text, i):
            return True
    return False


def _tokens(text: str) -> list[_Token]:
    """``text`` as tokens with their bracket depth; text groups split at connective words."""
    out: list[_Token] = []
    depth, bars, pieces = 0, 0, _TOKEN.findall(text)
    i = 0
    while i < len(pieces):
        piece, i = pieces[i], i + 1
        name = piece[1:] if piece.startswith("\\") else piece
        if piece.isspace() or piece == "~" or (piece.startswith("\\") and name in _DROP):
            continue
        if piece.startswith("\\") and name in _TEXT | {"hspace", "vspace"}:
            content, i = _group(pieces, i)
            out += _text_tokens(content, depth) if name in _TEXT else [_Token("sep", piece)]
            continue
        token = _classify(piece, name, out)
        if token.kind == "bar":
            bars += 1
            token.kind = "open" if bars % 2 else "close"
        if token.kind == "close":
            depth -= 1
        token.depth = depth
        if token.kind == "open":
            depth += 1
        out.append(token)
    if bars % 2:
        out.append(_Token("other", "|"))  # an unpaired bar
    return _merge_thousands(out)


def _classify(piece: str, name: str, before: list[_Token]) -> _Token:
    if piece in _OPEN or piece in _CLOSE:
        return _Token("open" if piece in _OPEN else "close", piece)
    if piece == "|":
        return _Token("bar", piece)
    if piece in (",", ";", "&") or (piece.startswith("\\") and name in _CONNECTIVES):
        return _Token("sep", piece)
    if piece.isalpha() and piece.lower() in _BARE_WORDS:
        return _Token("sep", piece)
    if piece in ("=", "<", ">") or (piece.startswith("\\") and name in _RELATIONS):
        return _Token("rel", piece)
    if piece[0].isdigit() or (piece[0] == "." and len(piece) > 1):
        return _Token("num2" if before and before[-1].kind == "num" else "num", piece)
    if piece.isalpha():
        return _Token("word", piece)
    if piece.startswith("\\"):
        return _Token("cmd" if name in _VALUE_COMMANDS else "other", piece)
    return _Token("op" if piece in "+-*/^_!':.%$" else "other", piece)


def _merge_thousands(tokens: list[_Token]) -> list[_Token]:
    """A number right after a number starts another value, except in ``1 000`` (one number)
    and ``\\frac 1 2`` or ``\\log_2 8`` (arguments)."""
    out: list[_Token] = []
    for token in tokens:
        if token.kind == "num2":
            token.kind = "num"
            if re.fullmatch(r"\d{3}", token.text) and re.fullmatch(r"\d+", out[-1].text):
                out[-1].text += token.text
                continue
            if len(out) < 2 or out[-2].text not in _TWO_ARGUMENTS | {"^", "_"}:
                out.append(_Token("sep", " ", token.depth))
        out.append(token)
    return out


def _group(pieces: list[str], i: int) -> tuple[str, int]:
    """The content of the brace group starting at ``pieces[i]`` and the index after it."""
    while i < len(pieces) and pieces[i].isspace():
        i += 1
    if i >= len(pieces) or pieces[i] != "{":
        return "", i
    depth, start = 0, i
    for j in range(i, len(pieces)):
        depth += {"{": 1, "}": -1}.get(pieces[j], 0)
        if depth == 0:
            return "".join(pieces[start + 1 : j]), j + 1
    return "".join(pieces[start + 1 :]), len(pieces)


def _text_tokens(content: str, depth: int) -> list[_Token]:
    """A ``\\text{}`` group: its words, each connective word or punctuation a separator."""
    out: list[_Token] = []
    content = re.sub(r"\b([A-Za-z])\.\s*([A-Za-z])\.", r"\1\2", content)  # i.e., e.g.
    for part in re.split(r"([,;|&]|\b[A-Za-z]+\b)", content):
        word = part.strip()
        if not word:
            continue
        if word.lower().strip(".") in _WORDS or word in ",;|&":
            out.append(_Token("sep", word, depth))
        elif out and out[-1].kind == "text":
            out[-1].text = out[-1].text[:-1] + f" {word}}}"
        else:
            out.append(_Token("text", rf"\text{{{word}}}", depth))
    return out


def _unclear(tokens: list[_Token]) -> list[_Token]:
    """Tokens that could hide a value: unknown ones, connectives inside brackets (commas of a
    tuple excepted), and text or long words followed by a number in the same value."""
    found = []
    for i, token in enumerate(tokens):
        nested_sep = token.kind == "sep" and token.depth > 0 and token.text != ","
        if token.kind == "other" or nested_sep:
            found.append(token)
        elif token.kind in ("text", "word") and _number_follows(tokens, i):
            long_word = token.kind == "text" or len(token.text) > 1
            if long_word and token.text not in _FUNCTIONS:
                found.append(token)
    return found


def _number_follows(tokens: list[_Token], i: int) -> bool:
    """Whether a value (a number, a fraction, a constant) follows ``tokens[i]`` in its value,
    exponents and subscripts (``\\text{m}^{2}``) aside."""
    j = i + 1
    while j < len(tokens):
        token = tokens[j]
        if token.kind in ("sep", "rel") or token.depth < tokens[i].depth:
            return False
        if token.text in ("^", "_"):
            j = _after_group(tokens, j + 1)
            continue
        if token.kind == "num" or (token.kind == "cmd" and token.text != r"\circ"):
            return True
        j += 1
    return False


def _after_group(tokens: list[_Token], j: int) -> int:
    """The index after the token or bracket group at ``j``."""
    if j < len(tokens) and tokens[j].kind == "open":
        depth = tokens[j].depth
        j += 1
        while j < len(tokens) and not (tokens[j].kind == "close" and tokens[j].depth == depth):
            j += 1
    return j + 1


def _split(tokens: list[_Token], kinds: set[str], *, sets: bool = True) -> list[list[_Token]]:
    """``tokens`` cut at top-level tokens of ``kinds``; with ``sets``, a written-out set is
    opened up (its elements are values)."""
    parts: list[list[_Token]] = [[]]
    for token in tokens:
        if token.kind in kinds and token.depth == 0:
            parts.append([])
        else:
            parts[-1].append(token)
    out = []
    for part in parts:
        inner = _set_contents(part) if sets else None
        out += _split(inner, kinds | {"sep"}) if inner is not None else [part] if part else []
    return out


def _set_contents(part: list[_Token]) -> list[_Token] | None:
    """The elements of ``\\{a, b\\}`` one level up; ``None`` for anything else (set-builder
    notation included)."""
    if len(part) < 2 or part[0].text != r"\{" or part[-1].text != r"\}":
        return None
    inner = part[1:-1]
    if any(t.depth == 1 and (t.kind == "rel" or t.text in (r"\mid", ":", "|")) for t in inner):
        return None
    if any(t.depth == 0 for t in inner):
        return None  # \{a\} \cup \{b\}: two groups, not one
    return [_Token(t.kind, t.text, t.depth - 1) for t in inner]


def _without_subjects(sides: list[list[_Token]]) -> list[list[_Token]]:
    """The sides of a relation chain that are values (a bare name is the chain's subject)."""
    values = [s for s in sides if not _is_subject(s)]
    return values or sides[-1:]


def _is_subject(side: list[_Token]) -> bool:
    text = _source(side)
    return bool(_SUBJECT.fullmatch(text)) and text not in _CONSTANTS


def _source(tokens: list[_Token]) -> str:
    """The tokens as LaTeX again: a space only where two names or a command and a name meet."""
    out = ""
    for token in tokens:
        text = token.text
        if out and text[:1].isalnum() and (out[-1].isalpha() or _COMMAND_END.search(out)):
            out += " "
        out += text
    return out


def _expand(tokens: list[_Token]) -> list[str]:
    r"""The value ``tokens`` state; two for each ``\pm`` or ``\mp``."""
    values = [_source(tokens)]
    while len(values) < MAX_VALUES and (match := _SIGNS.search(values[0])):
        value = values.pop(0)
        signs = ("+", "-") if match.group() == r"\pm" else ("-", "+")
        values += [value[: match.start()] + sign + value[match.end() :] for sign in signs]
        values.sort(key=lambda v: _SIGNS.search(v) is None)  # the ones left to expand first
    return values


def perturbations(value: str, limit: int = 24) -> list[tuple[str, str]]:
    """``value`` with one of its numbers (a 7 put in front) or one-letter variables (renamed)
    changed, and the part changed. If math-verify reads a variant as equal to ``value``, it
    ignored that part: ``3 \\max 4`` reads as 4 whatever the 3 is."""
    pieces, found, skip = _TOKEN.findall(value), [], -1
    bound = set(_BOUND.findall(value)) | set(_INTEGRAL.findall(value))
    for i, piece in enumerate(pieces):
        if piece.startswith("\\") and piece[1:] in _TEXT:
            skip = _group(pieces, i + 1)[1]  # units and words in text are not values
            if pieces[skip : skip + 1] == ["^"]:  # nor is a unit's power (cm^2)
                skip = (
                    _group(pieces, skip + 1)[1]
                    if pieces[skip + 1 : skip + 2] == ["{"]
                    else skip + 2
                )
        if i < skip:
            continue
        if piece[0].isdigit() and _exponent(pieces, i):
            new = str(int(piece) + 1) if piece.isdigit() else "7" + piece  # sympy stays quick
        elif piece[0].isdigit():
            new = "7" + piece  # over 7 times larger: far past any float tolerance
        elif len(piece) == 1 and piece.isalpha() and piece not in "ei" and piece not in bound:
            new = r"\zeta "
        else:
            continue
        found.append(("".join([*pieces[:i], new, *pieces[i + 1 :]]), piece))
    return found[:limit]


def _exponent(pieces: list[str], i: int) -> bool:
    """Whether ``pieces[i]`` is an exponent (``x^2``, ``x^{2}``)."""
    before = [p for p in pieces[:i] if not p.isspace()]
    return before[-1:] == ["^"] or before[-2:] == ["^", "{"]
