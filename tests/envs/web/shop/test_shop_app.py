"""The shop app without a browser: pages, cart and checkout state, and attempts to game the
grade (forged fields, guessed ids, double orders, empty orders)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from agentgym.envs.web.shop.app import ShopApp
from agentgym.envs.web.shop.catalog import Product
from agentgym.envs.web.shop.grading import Goal, grade_order
from agentgym.envs.web.shop.tasks import load_tasks


@pytest.fixture(scope="module")
def app() -> ShopApp:
    return ShopApp()


def _get(app: ShopApp, sid: str, url: str) -> tuple[int, str]:
    r = app.handle_url(sid, "GET", url)
    return r.status, r.body.decode()


def _post(app: ShopApp, sid: str, path: str, form: dict[str, str]) -> tuple[int, str]:
    r = app.handle(sid, "POST", path, {}, form)
    return r.status, r.body.decode()


def _buy_form(p: Product, action: str = "buy", **override: str) -> dict[str, str]:
    form = {"product": p.id, "action": action}
    form.update({f"option:{k}": v[0] for k, v in p.options.items()})
    form.update(override)
    return form


def _grade(app: ShopApp, sid: str, goal: Goal) -> float:
    s = app.sessions[sid]
    return grade_order(goal, app.lines(s.orders[0].lines)).reward if s.orders else 0.0


def _task_and_product(app: ShopApp, difficulty: int = 3) -> tuple[Goal, Product, dict[str, str]]:
    task = next(t for t in load_tasks() if t.difficulty == difficulty)
    goal = Goal.from_json(task.data["goal"])
    product = app.products[task.data["goal_products"][0]]
    form = _buy_form(product)
    form.update({f"option:{k}": v for k, v in goal.options.items()})
    return goal, product, form


class _Fields(HTMLParser):
    """Collects form fields, their labels and button texts."""

    def __init__(self) -> None:
        super().__init__()
        self.labels: set[str] = set()
        self.fields: list[dict[str, str | None]] = []
        self.buttons: list[str] = []
        self._in_button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "label" and a.get("for"):
            self.labels.add(str(a["for"]))
        if tag in ("input", "select") and a.get("type") != "hidden":
            self.fields.append(a)
        if tag == "button":
            self._in_button = True
            self.buttons.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_button = self._in_button and tag != "button"

    def handle_data(self, data: str) -> None:
        if self._in_button:
            self.buttons[-1] += data


def _check_accessible(html: str) -> None:
    parser = _Fields()
    parser.feed(html)
    for field in parser.fields:
        assert field.get("id") in parser.labels, f"unlabelled field {field}"
    assert all(b.strip() for b in parser.buttons), "a button without text"
    assert "<script" not in html


def test_pages_render_accessible(app: ShopApp) -> None:
    _goal, product, form = _task_and_product(app)
    urls = ["/", "/search?q=rain+jacket", f"/product/{product.id}", "/cart", "/checkout"]
    for url in urls:
        status, html = _get(app, "render", url)
        assert status == 200, url
        _check_accessible(html)
    status, html = _get(app, "render", f"/product/{product.id}")
    assert product.title in html
    assert "Buy now" in html
    assert "Add to cart" in html
    for name in product.options:
        assert f'name="option:{name}"' in html
    status, html = _post(app, "render", "/cart/add", form)
    _check_accessible(html)
    status, html = _post(app, "render", "/checkout/place", {})
    assert status == 200
    assert "Order 1 placed" in html
    _check_accessible(html)
    assert _get(app, "render", "/order/1")[0] == 200


def test_search_results_paginate(app: ShopApp) -> None:
    _, page1 = _get(app, "pages", "/search?q=tent")
    _, page2 = _get(app, "pages", "/search?q=tent&page=2")
    ids1 = set(re.findall(r"/product/(P\d+)", page1))
    ids2 = set(re.findall(r"/product/(P\d+)", page2))
    assert len(ids1) == 10
    assert len(ids2) == 10
    assert not ids1 & ids2
    assert "Next" in page1
    assert "Previous" in page2
    for bad in ("/search?q=tent&page=-3", "/search?q=tent&page=abc", "/search?q=tent&page=99999"):
        assert _get(app, "pages", bad)[0] == 200


def test_buy_now_places_a_graded_order(app: ShopApp) -> None:
    goal, product, form = _task_and_product(app)
    _get(app, "ok", f"/product/{product.id}")
    _post(app, "ok", "/cart/add", form)
    _post(app, "ok", "/checkout/place", {})
    assert _grade(app, "ok", goal) == 1.0


def test_cart_add_remove_and_quantities(app: ShopApp) -> None:
    _, product, form = _task_and_product(app)
    _get(app, "cart", f"/product/{product.id}")
    _post(app, "cart", "/cart/add", {**form, "action": "cart"})
    _post(app, "cart", "/cart/add", {**form, "action": "cart"})
    s = app.sessions["cart"]
    assert len(s.cart) == 1
    assert s.cart[0].quantity == 2
    _status, html = _get(app, "cart", "/cart")
    assert "quantity 2" in html
    assert "Cart (2)" in html
    _post(app, "cart", "/cart/remove", {"line": "0"})
    assert s.cart == []
    assert _post(app, "cart", "/cart/remove", {"line": "7"})[0] == 200  # nothing to remove


def test_sessions_are_separate(app: ShopApp) -> None:
    _, product, form = _task_and_product(app)
    _get(app, "one", f"/product/{product.id}")
    _post(app, "one", "/cart/add", {**form, "action": "cart"})
    assert app.session("two").cart == []
    app.drop("one")
    assert "one" not in app.sessions


def test_different_product_scores_below_one(app: ShopApp) -> None:
    goal, _product, _ = _task_and_product(app)
    other = next(p for p in app.catalog if p.category != goal.category)
    _get(app, "other", f"/product/{other.id}")
    _post(app, "other", "/cart/add", _buy_form(other))
    _post(app, "other", "/checkout/place", {})
    assert _grade(app, "other", goal) == 0.0


def test_wrong_option_scores_below_one(app: ShopApp) -> None:
    goal, product, form = _task_and_product(app)
    name, want = next(iter(goal.options.items()))
    wrong = next(v for v in product.options[name] if v != want)
    _get(app, "opt", f"/product/{product.id}")
    _post(app, "opt", "/cart/add", {**form, f"option:{name}": wrong})
    _post(app, "opt", "/checkout/place", {})
    assert 0.0 < _grade(app, "opt", goal) < 1.0


def test_forged_price_field_is_ignored(app: ShopApp) -> None:
    goal = Goal("jackets", "rain jacket", (), {}, 10.0)  # nothing costs under $10
    product = next(p for p in app.catalog if p.product_type == "rain jacket")
    _get(app, "forge", f"/product/{product.id}")
    _post(app, "forge", "/cart/add", _buy_form(product, price="1.00", **{"option:price": "1"}))
    _, html = _post(app, "forge", "/checkout/place", {"price": "0.01", "total": "0"})
    assert f"${product.price:,.2f}" in html
    assert _grade(app, "forge", goal) < 1.0
    assert not grade_order(goal, app.lines(app.sessions["forge"].orders[0].lines)).price_ok


def test_option_not_sold_is_refused(app: ShopApp) -> None:
    _, product, form = _task_and_product(app)
    name = next(iter(product.options))
    _get(app, "badopt", f"/product/{product.id}")
    status, html = _post(app, "badopt", "/cart/add", {**form, f"option:{name}": "XXXXL"})
    assert status == 400
    assert "not sold in" in html
    status, html = _post(app, "badopt", "/cart/add", {**form, f"option:{name}": ""})
    assert status == 400
    assert f"Choose a {name} first" in html
    assert app.sessions["badopt"].cart == []


def test_ordering_twice_keeps_the_first_order(app: ShopApp) -> None:
    goal, product, form = _task_and_product(app)
    other = next(p for p in app.catalog if p.category != goal.category)
    _get(app, "twice", f"/product/{product.id}")
    _get(app, "twice", f"/product/{other.id}")
    _post(app, "twice", "/cart/add", _buy_form(other))
    _post(app, "twice", "/checkout/place", {})
    _post(app, "twice", "/cart/add", form)
    status, _ = _post(app, "twice", "/checkout/place", {})
    assert status == 409
    assert len(app.sessions["twice"].orders) == 1
    assert _grade(app, "twice", goal) == 0.0


def test_empty_order_is_refused(app: ShopApp) -> None:
    status, html = _post(app, "empty", "/checkout/place", {})
    assert status == 400
    assert "cart is empty" in html
    assert app.sessions["empty"].orders == []


def test_non_existent_product_and_pages(app: ShopApp) -> None:
    assert _get(app, "404", "/product/P0000")[0] == 404
    assert _get(app, "404", "/product/../../etc/passwd")[0] == 404
    assert _get(app, "404", "/order/1")[0] == 404
    assert _get(app, "404", "/admin")[0] == 404
    assert _post(app, "404", "/cart/add", {"product": "NOPE", "action": "buy"})[0] == 404
    assert app.handle("404", "DELETE", "/cart", {}, {}).status == 405
    assert app.sessions["404"].cart == []


def test_buying_without_opening_the_product_page_is_refused(app: ShopApp) -> None:
    _, _product, form = _task_and_product(app)
    status, _ = _post(app, "blind", "/cart/add", form)
    assert status == 403
    assert app.sessions["blind"].cart == []


def test_several_items_in_one_order_earn_nothing(app: ShopApp) -> None:
    goal, product, form = _task_and_product(app)
    others = [p for p in app.catalog if p.product_type == goal.product_type][:5]
    for p in [product, *others]:
        _get(app, "all", f"/product/{p.id}")
        f = _buy_form(p, "cart") if p is not product else {**form, "action": "cart"}
        _post(app, "all", "/cart/add", f)
    _post(app, "all", "/checkout/place", {})
    assert _grade(app, "all", goal) == 0.0


def test_duplicate_form_fields_keep_the_first() -> None:
    app = ShopApp()
    product = app.catalog[0]
    _get(app, "dup", f"/product/{product.id}")
    name = next(iter(product.options))
    values = product.options[name]
    body = "&".join([f"product={product.id}", "action=cart",
                     *(f"option:{k}={v[0]}" for k, v in product.options.items()),
                     f"option:{name}={values[-1]}"]).encode()  # fmt: skip
    app.handle_url("dup", "POST", "/cart/add", body)
    assert dict(app.sessions["dup"].cart[0].options)[name] == values[0]
