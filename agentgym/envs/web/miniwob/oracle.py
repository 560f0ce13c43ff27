"""Scripted solutions of the curated MiniWoB++ tasks, through the env's own text actions.

``solve(task_id, instruction, nodes, history)`` reads the instruction and the observation's
nodes (``env.unwrapped.nodes``) and returns the next action (``'click(3)'``); ``history`` is the
actions already taken in the episode. The tests play every curated task with it and expect
reward 1; the benchmark uses it to drive both envs alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import cache

from agentgym.envs.web.miniwob.site import package_html
from agentgym.envs.web.observe import Node

__all__ = ["SOLVERS", "OracleError", "solve"]


class OracleError(RuntimeError):
    """The page does not hold what the scripted solution looks for."""


Solver = Callable[[str, Sequence[Node], Sequence[str]], str]


def _quoted(instruction: str) -> list[str]:
    return re.findall(r'"([^"]*)"', instruction)


def _find(nodes: Sequence[Node], roles: Sequence[str], name: str | None = None) -> Node:
    for node in nodes:
        if node.id is not None and node.role in roles and (name is None or node.name == name):
            return node
    raise OracleError(f"no {'/'.join(roles)} named {name!r} among {[n.line() for n in nodes]}")


def _all(nodes: Sequence[Node], roles: Sequence[str]) -> list[Node]:
    return [n for n in nodes if n.id is not None and n.role in roles]


def _click(node: Node) -> str:
    return f"click({node.id})"


def _fill(node: Node, text: str) -> str:
    return f"fill({node.id}, {json.dumps(text, ensure_ascii=False)})"


def _submit(nodes: Sequence[Node], names: Sequence[str] = ("Submit",)) -> str:
    for node in _all(nodes, ("button",)):
        if node.name.strip().lower() in {name.lower() for name in names}:
            return _click(node)
    raise OracleError(f"no button named one of {list(names)}")


def _fill_then_submit(
    nodes: Sequence[Node], texts: Sequence[str], submit: Sequence[str] = ("Submit",)
) -> str:
    """Fill the page's text fields in order with ``texts``, then press ``submit``."""
    fields = _all(nodes, ("textbox", "input"))
    for field, text in zip(fields, texts, strict=False):
        if field.value != text:
            return _fill(field, text)
    return _submit(nodes, submit)


def _click_named(roles: Sequence[str]) -> Solver:
    def solver(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
        return _click(_find(nodes, roles, _quoted(instruction)[0]))

    return solver


def _click_fixed(role: str, name: str) -> Solver:
    def solver(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
        return _click(_find(nodes, (role,), name))

    return solver


def _button_sequence(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    return _click(_find(nodes, ("button",), "TWO" if history else "ONE"))


def _focus_text(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    return _click(_all(nodes, ("textbox",))[0])


def _focus_text_2(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    position = re.search(r"(\d)(?:st|nd|rd|th)", instruction)
    if position is None:
        raise OracleError(f"no position in {instruction!r}")
    return _click(_all(nodes, ("textbox",))[int(position.group(1)) - 1])


def _dialog_button(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    quoted = _quoted(instruction)
    target = quoted[0] if quoted else "x"
    return _click(_find(nodes, ("button",), "Close" if target == "x" else target))


def _click_tab(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    found = re.search(r"Tab #\d", instruction)
    if found is None:
        raise OracleError(f"no tab in {instruction!r}")
    return _click(_find(nodes, ("tab", "link"), found.group(0)))


_WIDGET_ROLES = {"radio": "radio", "checkbox": "checkbox", "text": "input",
                 "textarea": "textbox", "button": "button"}


def _click_widget(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    return _click(_find(nodes, (_WIDGET_ROLES[_quoted(instruction)[0]],)))


def _collapsible(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    if not history:
        return _click(_find(nodes, ("tab",)))
    return _submit(nodes)


def _click_option(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    target = instruction.removeprefix("Select ").removesuffix(" and click Submit.")
    radio = _find(nodes, ("radio",), target)
    return _submit(nodes) if radio.checked else _click(radio)


def _click_checkboxes(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    listed = instruction.removeprefix("Select ").removesuffix(" and click Submit.")
    wanted = set() if listed == "nothing" else set(listed.split(", "))
    for box in _all(nodes, ("checkbox",)):
        if bool(box.checked) != (box.name.strip() in wanted):
            return _click(box)
    return _submit(nodes)


def _choose_list(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    target = instruction.removeprefix("Select ").removesuffix(" from the list and click Submit.")
    select = _find(nodes, ("combobox",))
    if select.value != target:
        return f"select_option({select.id}, {json.dumps(target, ensure_ascii=False)})"
    return _submit(nodes)


def _enter_text(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    return _fill_then_submit(nodes, [_quoted(instruction)[0]])


def _enter_text_2(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    word = _quoted(instruction)[0]
    text = word.upper() if "upper case" in instruction else word.lower()
    return _fill_then_submit(nodes, [text])


def _enter_password(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    password = _quoted(instruction)[0]
    return _fill_then_submit(nodes, [password, password])


def _login(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    for button in _all(nodes, ("button",)):
        if button.name.strip() == "Cancel":  # login-user-popup's popup: dismiss it
            return _click(button)
    user, password = _quoted(instruction)[:2]
    # login-user's button says "Login", login-user-popup's "OK"
    return _fill_then_submit(nodes, [user, password], submit=("Login", "OK"))


_SUM = re.compile(r"(-?\d+) ([-+x]) (-?\d+) =")


def _arithmetic(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    for node in nodes:
        found = _SUM.search(node.name)
        if found:
            left, op, right = int(found.group(1)), found.group(2), int(found.group(3))
            result = left + right if op == "+" else left - right if op == "-" else left * right
            return _fill_then_submit(nodes, [str(result)])
    raise OracleError("no sum on the page")


@cache
def _countries() -> tuple[str, ...]:
    source = package_html().joinpath("common", "ui_utils.js").read_text()
    found = re.search(r"COUNTRIES\s*=\s*\[(.*?)\]", source, re.S)
    if found is None:
        raise OracleError("ui_utils.js lists no COUNTRIES")
    return tuple(re.findall(r"['\"]([^'\"]+)['\"]", found.group(1)))


def _autocomplete(instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    quoted = _quoted(instruction)
    start, end = quoted[0], quoted[1] if len(quoted) > 1 else ""
    item = next(c for c in _countries() if c.startswith(start) and c.endswith(end))
    field = _find(nodes, ("textbox",))
    if field.value == item:  # the suggestion menu covers Submit: pick the item to close it
        for node in _all(nodes, ("clickable", "menuitem", "option")):
            if node.name == item:
                return _click(node)
    return _fill_then_submit(nodes, [item])


SOLVERS: dict[str, Solver] = {
    "click-button": _click_named(("button",)),
    "click-link": _click_named(("link",)),
    "click-test": _click_fixed("button", "Click Me!"),
    "click-test-2": _click_fixed("button", "ONE"),
    "focus-text": _focus_text,
    "click-dialog": _dialog_button,
    "unicode-test": _click_named(("button",)),
    "click-tab": _click_tab,
    "click-button-sequence": _button_sequence,
    "focus-text-2": _focus_text_2,
    "click-widget": _click_widget,
    "click-dialog-2": _dialog_button,
    "click-collapsible-nodelay": _collapsible,
    "click-option": _click_option,
    "click-checkboxes": _click_checkboxes,
    "choose-list": _choose_list,
    "enter-text": _enter_text,
    "enter-text-dynamic": _enter_text,
    "enter-text-2": _enter_text_2,
    "enter-password": _enter_password,
    "login-user": _login,
    "login-user-popup": _login,
    "simple-arithmetic": _arithmetic,
    "use-autocomplete-nodelay": _autocomplete,
}
"""A scripted solution for every curated task."""


def solve(task_id: str, instruction: str, nodes: Sequence[Node], history: Sequence[str]) -> str:
    """The next action of the scripted solution of ``task_id``."""
    return SOLVERS[task_id](instruction, nodes, history)
