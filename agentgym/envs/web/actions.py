"""The action grammar: ``click(12)``, ``fill(12, "text")``, ... parsed, never evaluated.

An action is one call of a whitelisted name with literal arguments (ints and strings), written
as text (alone, on its own line, or in a fenced block) or as a tool call with the same name (its
schemas are ``TOOLS``). ``parse`` answers a ``WebAction`` or the reason the text is not one;
``perform`` runs a ``WebAction`` on a page and answers the model's error as text (an id that is not
on the page, an option that does not exist), raising only for what is not the model's fault.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urljoin, urlsplit

from agentgym.core.tools import Tool, clip
from agentgym.envs.web.observe import ID_ATTRIBUTE, PageView

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = [
    "SIGNATURES",
    "TOOLS",
    "WebAction",
    "action_choices",
    "origin_of",
    "parse",
    "perform",
]

SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("element",),
    "fill": ("element", "text"),
    "select_option": ("element", "value"),
    "press": ("key",),
    "hover": ("element",),
    "scroll": ("direction",),
    "go_back": (),
    "goto": ("url",),
    "stop": ("answer",),
}
"""Each action's parameter names, in order (``element`` is an int, the others strings)."""

GRAMMAR = (
    'click(id), fill(id, "text"), select_option(id, "option"), press("Enter"), hover(id), '
    'scroll("down"|"up"), go_back(), goto("/path"), stop("answer")'
)
_MAX_CHARS = 20_000
_MAX_URL = 4096
_CALL = re.compile(r"\b(" + "|".join(SIGNATURES) + r")\s*\(.*\)", re.DOTALL)
_FENCE = re.compile(r"```(?:[\w+-]*\n)?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class WebAction:
    """A parsed action: its name and arguments by parameter name."""

    name: str
    arguments: Mapping[str, Any]

    def text(self) -> str:
        """The action written in the grammar (what ``parse`` reads back)."""
        args = [self.arguments[p] for p in SIGNATURES[self.name] if p in self.arguments]
        return f"{self.name}({', '.join(_literal(a) for a in args)})"


def _literal(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def from_arguments(name: str, arguments: Mapping[str, Any]) -> WebAction | str:
    """Check a call's arguments against the grammar; a ``WebAction`` or the reason not."""
    params = SIGNATURES.get(name)
    if params is None:
        return f"unknown action {clip(name, 40)!r}; actions: {GRAMMAR}"
    extra = sorted(str(k) for k in set(arguments) - set(params))
    if extra:
        return f"{name} takes {', '.join(params) or 'no arguments'}, not {', '.join(extra)}"
    args = dict(arguments)
    if name == "stop":
        args.setdefault("answer", "")
    missing = [p for p in params if p not in args]
    if missing:
        return f"{name} needs {', '.join(missing)}: {name}({', '.join(params)})"
    for param, value in args.items():
        if param == "element":
            if isinstance(value, bool) or not isinstance(value, int):
                shown = clip(repr(value), 40)
                return f"{name}: the element must be an id number like 12, not {shown}"
        elif not isinstance(value, str):
            return f"{name}: {param} must be a string in quotes, not {clip(repr(value), 40)}"
    if name == "scroll" and args["direction"] not in ("up", "down"):
        return 'scroll takes "up" or "down"'
    return WebAction(name, args)


def _parse_call(text: str) -> WebAction | str:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"could not read {clip(text, 80)!r} as an action; actions: {GRAMMAR}"
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return f"{clip(text, 80)!r} is not an action call; actions: {GRAMMAR}"
    name = call.func.id
    params = SIGNATURES.get(name)
    if params is None:
        return from_arguments(name, {})
    values: list[Any] = []
    for node in [*call.args, *(k.value for k in call.keywords)]:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, int | str)):
            return f"{name}: arguments must be numbers or quoted strings"
        values.append(node.value)
    if len(call.args) > len(params):
        return f"{name} takes {len(params)} argument(s): {name}({', '.join(params)})"
    arguments = dict(zip(params, values[: len(call.args)], strict=False))
    for keyword, value in zip(call.keywords, values[len(call.args) :], strict=True):
        if keyword.arg is None or keyword.arg in arguments:
            return f"{name}: repeated or unpacked arguments"
        arguments[keyword.arg] = value
    return from_arguments(name, arguments)


def parse(text: str) -> WebAction | str:
    """Read one action from a model's text: the last fenced block if there is one, else the
    whole text, else the last line holding an action call. A ``WebAction``, or why not."""
    text = text[:_MAX_CHARS]
    fences = _FENCE.findall(text)
    candidate = (fences[-1] if fences else text).strip()
    if not candidate:
        return f"no action found; write one of: {GRAMMAR}"
    whole = _parse_call(candidate)
    if isinstance(whole, WebAction):
        return whole
    for line in reversed(candidate.splitlines()):
        match = _CALL.search(line)
        if match:
            return _parse_call(match.group(0))
    return whole


# --- tools ----------------------------------------------------------------------------------


def click(element: int) -> str:
    """Click an element of the page.

    Args:
        element: the element's id, the number in brackets in the observation.
    """
    return ""


def fill(element: int, text: str) -> str:
    """Replace the text of a text field.

    Args:
        element: the field's id.
        text: the text to type into it.
    """
    return ""


def select_option(element: int, value: str) -> str:
    """Choose an option of a drop-down list.

    Args:
        element: the list's id.
        value: the option's label as shown in the observation.
    """
    return ""


def press(key: str) -> str:
    """Press a key on the focused element, e.g. Enter, Tab, ArrowDown, Control+A.

    Args:
        key: the key, in Playwright's key names.
    """
    return ""


def hover(element: int) -> str:
    """Move the mouse over an element.

    Args:
        element: the element's id.
    """
    return ""


def scroll(direction: Literal["up", "down"]) -> str:
    """Scroll the page by most of a screen.

    Args:
        direction: up or down.
    """
    return ""


def go_back() -> str:
    """Go back to the previous page."""
    return ""


def goto(url: str) -> str:
    """Open a URL of this site (absolute, or a path like /cart).

    Args:
        url: the address; other sites are blocked.
    """
    return ""


def stop(answer: str) -> str:
    """End the episode, with the answer if the task asks for one.

    Args:
        answer: the answer to the task, or "" when it asks for none.
    """
    return ""


TOOLS: tuple[Tool, ...] = tuple(
    Tool.from_function(fn)
    for fn in (click, fill, select_option, press, hover, scroll, go_back, goto, stop)
)
"""The actions as tools; the env applies them (these functions only declare schemas)."""


# --- choices ----------------------------------------------------------------------------------


def action_choices(view: PageView, limit: int) -> list[str]:
    """Every click and option choice on the page plus ``stop("")``, or ``[]`` when there are
    more than ``limit``."""
    choices: list[str] = []
    for node in view.interactive:
        if node.options:
            choices += [WebAction("select_option", {"element": node.id, "value": o}).text()
                        for o in dict.fromkeys(node.options)]
        elif node.clickable:
            choices.append(f"click({node.id})")
        if len(choices) >= limit:
            return []
    choices.append('stop("")')
    return list(dict.fromkeys(choices))


# --- performing -------------------------------------------------------------------------------


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


async def perform(
    page: Page, action: WebAction, view: PageView, timeout: float, allowed: Sequence[str]
) -> str | None:
    """Run ``action`` on ``page``; the model's error as text, or ``None``. Playwright errors that
    mean the browser is gone propagate (the env turns them into ``infra_error``)."""
    from playwright.async_api import Error as PlaywrightError

    ms = timeout * 1000
    args = action.arguments
    try:
        if "element" in args:
            return await _on_element(page, action, view, ms)
        if action.name == "press":
            await page.keyboard.press(args["key"])
        elif action.name == "scroll":
            height = (page.viewport_size or {"height": 720})["height"]
            await page.mouse.wheel(0, (0.8 if args["direction"] == "down" else -0.8) * height)
        elif action.name == "go_back":
            return await _go_back(page, ms, allowed)
        elif action.name == "goto":
            if len(args["url"]) > _MAX_URL:
                return f"the URL is {len(args['url'])} characters long; at most {_MAX_URL}"
            url = urljoin(page.url, args["url"])
            if origin_of(url) not in allowed:
                sites = ", ".join(allowed)
                return f"goto({clip(args['url'], 80)!r}) leaves the site; allowed: {sites}"
            await page.goto(url, timeout=ms, wait_until="commit")
        return None
    except PlaywrightError as e:
        if "Unknown key" in str(e) or "Timeout" in type(e).__name__ or "Timeout" in str(e):
            return f"{action.text()} failed: {_first_line(e)}"
        raise


async def _go_back(page: Page, ms: float, allowed: Sequence[str]) -> str | None:
    # The Navigation API lists this origin's entries only: the blank page the tab started on
    # (or another site) is not "back" on this site.
    can = await page.evaluate("() => window.navigation ? navigation.canGoBack : null")
    if can is False:
        return "there is no previous page on this site"
    before = page.url
    response = await page.go_back(timeout=ms, wait_until="commit")
    if origin_of(page.url) not in allowed:  # the blank page the episode's tab started on
        await page.go_forward(timeout=ms, wait_until="commit")
        return "there is no previous page on this site"
    if response is None and page.url == before:
        return "there is no previous page"
    return None


async def _on_element(page: Page, action: WebAction, view: PageView, ms: float) -> str | None:
    element = action.arguments["element"]
    locator = page.locator(f'[{ID_ATTRIBUTE}="{element}"]')
    if await locator.count() == 0:
        return f"there is no element [{element}] on the page"
    if action.name == "click":
        await locator.first.click(timeout=ms)
    elif action.name == "hover":
        await locator.first.hover(timeout=ms)
    elif action.name == "fill":
        node = view.node(element)
        if node is not None and node.role not in ("textbox", "input", "searchbox", "clickable"):
            return f"[{element}] is a {node.role}, not a text field; fill needs a textbox"
        await locator.first.fill(action.arguments["text"], timeout=ms)
    else:
        return await _select(locator, action.arguments["value"], element, ms)
    return None


async def _select(locator: Any, value: str, element: int, ms: float) -> str | None:
    options: list[list[str]] = await locator.first.evaluate(
        "el => el.tagName === 'SELECT'"
        " ? Array.from(el.options).map(o => [o.label || o.text, o.value]) : null"
    )
    if options is None:
        return f"[{element}] is not a drop-down list; select_option needs a combobox"
    for label, raw in options:
        if value in (label.strip(), raw):
            await locator.first.select_option(value=raw, timeout=ms)
            return None
    labels = ", ".join(repr(label.strip()) for label, _ in options[:30])
    return f"[{element}] has no option {clip(value, 60)!r}; options: {labels}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return clip(text.splitlines()[0] if text else type(error).__name__, 200)
