"""The shop's pages as small, plain, semantic HTML: labelled fields, buttons with text, no
scripts, so the text observation of each page is short and unambiguous."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import urlencode

from agentgym.envs.web.shop.catalog import Product
from agentgym.envs.web.shop.search import PAGE_SIZE

__all__ = [
    "cart_page",
    "checkout_page",
    "home_page",
    "message_page",
    "order_page",
    "product_page",
    "results_page",
]

Line = tuple[Product, Mapping[str, str], int]


def _doc(title: str, body: str, cart_count: int) -> str:
    nav = f'<nav><a href="/">Home</a> <a href="/cart">Cart ({cart_count})</a></nav>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - Agentgym Shop</title></head>"
        f"<body><header>{nav}</header><main>{body}</main></body></html>"
    )


def _search_form(query: str = "") -> str:
    return (
        '<form action="/search" method="get" role="search">'
        '<label for="q">Search</label> '
        f'<input id="q" name="q" type="text" value="{escape(query)}"> '
        '<button type="submit">Search</button></form>'
    )


def _alert(error: str | None) -> str:
    return f'<p role="alert">{escape(error)}</p>' if error else ""


def _money(value: float) -> str:
    return f"${value:,.2f}"


def home_page(cart_count: int) -> str:
    body = "<h1>Agentgym Shop</h1>" + _search_form() + "<p>Search for a product to begin.</p>"
    return _doc("Home", body, cart_count)


def results_page(
    query: str, page: int, results: Sequence[Product], total: int, cart_count: int
) -> str:
    start = (page - 1) * PAGE_SIZE
    items = "".join(
        f'<li><a href="/product/{p.id}">{escape(p.title)}</a> {_money(p.price)}'
        f" (rating {p.rating})</li>"
        for p in results
    )
    shown = f"Results {start + 1}-{start + len(results)} of {total}" if results else "No results"
    links = []
    if page > 1:
        links.append(f'<a href="/search?{urlencode({"q": query, "page": page - 1})}">Previous</a>')
    if start + len(results) < total:
        links.append(f'<a href="/search?{urlencode({"q": query, "page": page + 1})}">Next</a>')
    body = (
        _search_form(query) + f"<h1>{escape(shown)}</h1>"
        + f'<ol start="{start + 1}">{items}</ol>'
        + (f"<p>Page {page}: {' '.join(links)}</p>" if links else "")
    )  # fmt: skip
    return _doc(f"Search: {query}", body, cart_count)


def _select(name: str, values: Sequence[str], chosen: str | None) -> str:
    field = f"opt-{name.replace(' ', '-')}"
    opts = [f'<option value="">Choose {escape(name)}</option>']
    for v in values:
        sel = " selected" if v == chosen else ""
        opts.append(f'<option value="{escape(v)}"{sel}>{escape(v)}</option>')
    return (
        f'<p><label for="{field}">{escape(name.capitalize())}</label> '
        f'<select id="{field}" name="option:{escape(name)}">{"".join(opts)}</select></p>'
    )


def product_page(
    p: Product, back: str | None, cart_count: int,
    chosen: Mapping[str, str] | None = None, error: str | None = None,
) -> str:  # fmt: skip
    selects = "".join(_select(k, v, (chosen or {}).get(k)) for k, v in p.options.items())
    back_link = f'<p><a href="{escape(back)}">Back to results</a></p>' if back else ""
    body = (
        back_link + _alert(error) + f"<h1>{escape(p.title)}</h1>"
        + f"<p>Price: {_money(p.price)}. Rating {p.rating} of 5 ({p.reviews} reviews).</p>"
        + f"<p>{escape(p.description)}</p>"
        + f"<p>Features: {escape(', '.join(p.attributes))}.</p>"
        + '<form action="/cart/add" method="post"><input type="hidden" name="product"'
        + f' value="{p.id}">{selects}'
        + '<button type="submit" name="action" value="buy">Buy now</button> '
        + '<button type="submit" name="action" value="cart">Add to cart</button></form>'
    )  # fmt: skip
    return _doc(p.title, body, cart_count)


def _options_text(chosen: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in chosen.items())


def _lines(lines: Sequence[Line], removable: bool) -> str:
    items = []
    for i, (p, chosen, qty) in enumerate(lines):
        opts = f" ({escape(_options_text(chosen))})" if chosen else ""
        remove = (
            f'<form action="/cart/remove" method="post"><input type="hidden" name="line"'
            f' value="{i}"><button type="submit">Remove {escape(p.title)}</button></form>'
            if removable else ""
        )  # fmt: skip
        items.append(f"<li>{escape(p.title)}{opts}, quantity {qty}, {_money(p.price)}{remove}</li>")
    total = sum(p.price * qty for p, _, qty in lines)
    return f"<ul>{''.join(items)}</ul><p>Total: {_money(total)}</p>"


def cart_page(lines: Sequence[Line], error: str | None = None) -> str:
    count = sum(q for _, _, q in lines)
    if not lines:
        return _doc("Cart", _alert(error) + "<h1>Your cart</h1><p>Your cart is empty.</p>", 0)
    body = (
        _alert(error) + "<h1>Your cart</h1>" + _lines(lines, removable=True)
        + '<p><a href="/checkout">Proceed to checkout</a></p>'
    )  # fmt: skip
    return _doc("Cart", body, count)


def checkout_page(lines: Sequence[Line], error: str | None = None) -> str:
    count = sum(q for _, _, q in lines)
    if not lines:
        body = _alert(error) + "<h1>Checkout</h1><p>Your cart is empty.</p>"
        return _doc("Checkout", body, 0)
    body = (
        _alert(error) + "<h1>Checkout</h1>" + _lines(lines, removable=False)
        + '<form action="/checkout/place" method="post">'
        + '<button type="submit">Place order</button></form>'
    )  # fmt: skip
    return _doc("Checkout", body, count)


def order_page(number: int, lines: Sequence[Line]) -> str:
    body = (
        f"<h1>Order {number} placed</h1><p>Thank you. Your order:</p>"
        + _lines(lines, removable=False)
    )
    return _doc(f"Order {number}", body, 0)


def message_page(title: str, text: str, cart_count: int) -> str:
    body = f"<h1>{escape(title)}</h1><p role=\"alert\">{escape(text)}</p>"
    return _doc(title, body + '<p><a href="/">Back to the shop</a></p>', cart_count)
