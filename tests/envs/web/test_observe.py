"""The observation: nodes rendered as text within a budget, stable ids, screenshots."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.envs.web.observe import Node, PageView, render


def view(*nodes: Node, url: str = "http://x.test/") -> PageView:
    return PageView(url, "", tuple(nodes))


def test_render_writes_one_line_per_node() -> None:
    text = render(
        PageView(
            "http://shop.agentgym.test/search?q=rain+jacket",
            "Results",
            (
                Node(1, "link", "Home"),
                Node(2, "textbox", "Search", value="rain jacket"),
                Node(None, "heading", "Results"),
                Node(None, "text", 'The "best" $79.99'),
                Node(9, "combobox", "Size", value="M", options=("S", "M", "L")),
                Node(4, "checkbox", "Gift wrap", checked=False),
            ),
            focused=2,
        ),
        "there is no element [12] on the page",
        10_000,
    )
    assert text.splitlines() == [
        "URL: http://shop.agentgym.test/search?q=rain+jacket",
        "Title: Results",
        "Focused: [2]",
        "Last action error: there is no element [12] on the page",
        '[1] link "Home"',
        '[2] textbox "Search" value="rain jacket"',
        'heading "Results"',
        'text "The \\"best\\" $79.99"',
        '[9] combobox "Size" value="M" options=["S", "M", "L"]',
        '[4] checkbox "Gift wrap" unchecked',
    ]


def test_long_pages_are_cut_with_a_note() -> None:
    nodes = [Node(i, "link", f"link number {i}") for i in range(1, 501)]
    text = render(view(*nodes), None, 2_000)
    assert len(text) <= 2_000 + 200  # the note may pass the budget by its own length
    last = text.splitlines()[-1]
    assert last.startswith("... (page cut: ")
    shown = sum(1 for line in text.splitlines() if line.startswith("["))
    assert f"{500 - shown} more elements" in last
    assert render(view(), None, 2_000).endswith("(the page is empty)")


def test_hidden_elements_are_left_out_and_ids_are_stable(make_env: Any) -> None:
    env = make_env()
    observation, _ = env.reset(seed=0, options={"task_id": "press"})
    text = observation[1]["content"]
    assert "Hidden button" not in text
    before = {n.id: n.name for n in env.unwrapped.nodes if n.id is not None}
    assert before == {1: "Go to form", 2: "Long page", 3: "Press me"}
    env.step("click(3)")  # the page changes around the elements
    after = {n.id: n.name for n in env.unwrapped.nodes if n.id is not None}
    assert after == before
    assert any(n.role == "text" and n.name == "clicked 1" for n in env.unwrapped.nodes)


def test_ids_below_the_cut_still_work(make_env: Any) -> None:
    env = make_env(max_obs_chars=1_500)
    env.reset(seed=0, options={"task_id": "press"})
    observation, *_ = env.step("click(2)")
    text = observation[0]["content"]
    assert "page cut" in text
    assert len(text) < 1_800
    ids = [n.id for n in env.unwrapped.nodes if n.id is not None]
    assert len(ids) == 400
    observation, *_, info = env.step(f"click({ids[-1]})")  # far below the cut
    assert info["invalid_action"] is False
    assert info["url"].endswith("/#399")


def test_screenshots_as_arrays(make_env: Any) -> None:
    env = make_env(render_mode="rgb_array", screenshot_in_info=True, viewport=(640, 480))
    _, info = env.reset(seed=0, options={"task_id": "press"})
    frame = env.render()
    assert isinstance(frame, np.ndarray)
    assert frame.shape == (480, 640, 3)
    assert frame.dtype == np.uint8
    assert frame.min() < 128 < frame.max()  # text on a white page, not a blank frame
    assert np.array_equal(info["screenshot"], frame)
    _, _, _, _, info = env.step("click(3)")
    assert info["screenshot"].shape == (480, 640, 3)


def test_ansi_render_is_the_page_text(make_env: Any) -> None:
    env = make_env(render_mode="ansi")
    observation, _ = env.reset(seed=0, options={"task_id": "press"})
    assert env.render() in observation[1]["content"]
