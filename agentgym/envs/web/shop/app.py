"""The shop as a pure request handler: ``ShopApp.handle(session, method, path, query, form)``.

No browser or socket is needed: ``ShopSite`` feeds it requests intercepted from Chromium, the
``python -m agentgym.envs.web.shop`` server feeds it HTTP requests, and the tests call it
directly. Per-episode state (cart, orders, pages seen) lives in a ``Session`` keyed by an id.

Routes: ``GET /``, ``GET /search?q=&page=``, ``GET /product/<id>``, ``POST /cart/add``
(``product``, ``option:<name>`` fields, ``action`` = ``buy`` or ``cart``), ``GET /cart``,
``POST /cart/remove`` (``line``), ``GET /checkout``, ``POST /checkout/place``,
``GET /order/<n>``. The server trusts nothing a form sends but ids and option values, which it
checks against the catalogue; prices always come from the catalogue. A POST answers with the
page it leads to (the cart, the checkout, the order) rather than a redirect: Chromium does not
follow a redirect fulfilled by request interception for a form submission. A product can only be
put in the cart after its page was opened in the same session (no buying by guessed ids), and a
session places at most one order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit

from agentgym.envs.web.shop import pages
from agentgym.envs.web.shop.catalog import Product, load_catalog
from agentgym.envs.web.shop.search import SearchIndex

__all__ = ["CartLine", "Order", "Response", "Session", "ShopApp", "parse_form"]

_HTML = {"content-type": "text/html; charset=utf-8"}
_MAX_PAGE = 1000


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class CartLine:
    product_id: str
    options: tuple[tuple[str, str], ...]
    quantity: int = 1


@dataclass(frozen=True)
class Order:
    number: int
    lines: tuple[CartLine, ...]


@dataclass
class Session:
    """One episode's state."""

    cart: list[CartLine] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    visited: set[str] = field(default_factory=set)  # product ids whose page was opened
    pages: list[str] = field(default_factory=list)  # every path requested, in order
    last_search: str | None = None


def parse_form(body: bytes | str) -> dict[str, str]:
    """An urlencoded body (or query string) as a dict; a repeated field keeps its first value."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    out: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        out.setdefault(key, value)
    return out


def _html(status: int, text: str) -> Response:
    return Response(status, _HTML, text.encode())


@lru_cache(maxsize=1)
def _shipped_index() -> SearchIndex:
    return SearchIndex(load_catalog())


class ShopApp:
    """The shop over a catalogue (the shipped one by default), with a session per id."""

    def __init__(self, catalog: tuple[Product, ...] | None = None) -> None:
        self.catalog = catalog if catalog is not None else load_catalog()
        self.products = {p.id: p for p in self.catalog}
        # every env of a process shares the shipped catalogue's index (it is read-only)
        self.index = SearchIndex(self.catalog) if catalog is not None else _shipped_index()
        self.sessions: dict[str, Session] = {}

    # -- sessions ---------------------------------------------------------------------------
    def session(self, session_id: str) -> Session:
        """The session ``session_id`` (created on first use)."""
        return self.sessions.setdefault(session_id, Session())

    def drop(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)

    def lines(self, lines: list[CartLine] | tuple[CartLine, ...]) -> list[pages.Line]:
        """Cart lines with their catalogue products, for rendering and grading."""
        return [(self.products[ln.product_id], dict(ln.options), ln.quantity) for ln in lines]

    # -- requests ---------------------------------------------------------------------------
    def handle_url(self, session_id: str, method: str, url: str, body: bytes = b"") -> Response:
        """``handle`` for a full URL (or path with a query string) and a raw form body."""
        parts = urlsplit(url)
        form = parse_form(body) if method.upper() == "POST" else {}
        return self.handle(session_id, method, parts.path or "/", parse_form(parts.query), form)

    def handle(
        self, session_id: str, method: str, path: str,
        query: Mapping[str, str], form: Mapping[str, str],
    ) -> Response:  # fmt: skip
        """Answer one request of session ``session_id``."""
        s = self.session(session_id)
        s.pages.append(path + (f"?{urlencode(dict(query))}" if query else ""))
        method = method.upper()
        if method == "GET":
            return self._get(s, path, query)
        if method == "POST":
            return self._post(s, path, form)
        return _html(405, pages.message_page("Not allowed", f"{method} is not supported.", 0))

    def _count(self, s: Session) -> int:
        return sum(ln.quantity for ln in s.cart)

    def _not_found(self, s: Session, what: str) -> Response:
        text = f"{what} does not exist."
        return _html(404, pages.message_page("Not found", text, self._count(s)))

    def _get(self, s: Session, path: str, query: Mapping[str, str]) -> Response:
        if path == "/":
            return _html(200, pages.home_page(self._count(s)))
        if path == "/search":
            return self._search(s, query)
        if path.startswith("/product/"):
            return self._product(s, path.removeprefix("/product/"))
        if path == "/cart":
            return _html(200, pages.cart_page(self.lines(s.cart)))
        if path == "/checkout":
            return _html(200, pages.checkout_page(self.lines(s.cart)))
        if path.startswith("/order/"):
            number = path.removeprefix("/order/")
            for order in s.orders:
                if str(order.number) == number:
                    return _html(200, pages.order_page(order.number, self.lines(order.lines)))
            return self._not_found(s, f"Order {number!r}")
        return self._not_found(s, f"The page {path!r}")

    def _search(self, s: Session, query: Mapping[str, str]) -> Response:
        q = query.get("q", "").strip()
        if not q:
            return _html(200, pages.home_page(self._count(s)))
        raw = query.get("page", "1")
        page = min(int(raw), _MAX_PAGE) if raw.isdigit() and int(raw) > 0 else 1
        results, total = self.index.page(q, page)
        s.last_search = f"/search?{urlencode({'q': q, 'page': page})}"
        return _html(200, pages.results_page(q, page, results, total, self._count(s)))

    def _product(self, s: Session, product_id: str) -> Response:
        p = self.products.get(product_id)
        if p is None:
            return self._not_found(s, f"Product {product_id!r}")
        s.visited.add(p.id)
        return _html(200, pages.product_page(p, s.last_search, self._count(s)))

    def _post(self, s: Session, path: str, form: Mapping[str, str]) -> Response:
        if path == "/cart/add":
            return self._add(s, form)
        if path == "/cart/remove":
            line = form.get("line", "")
            if line.isdigit() and int(line) < len(s.cart):
                del s.cart[int(line)]
            return self._get(s, "/cart", {})
        if path == "/checkout/place":
            return self._place(s)
        return self._not_found(s, f"The action {path!r}")

    def _add(self, s: Session, form: Mapping[str, str]) -> Response:
        p = self.products.get(form.get("product", ""))
        if p is None:
            return self._not_found(s, f"Product {form.get('product', '')!r}")
        if p.id not in s.visited:
            text = "Open the product's page before adding it to the cart."
            return _html(403, pages.message_page("Not allowed", text, self._count(s)))
        chosen = {k: form.get(f"option:{k}", "") for k in p.options}
        error = next((f"Choose a {k} first." for k, v in chosen.items() if not v), None)
        bad = [k for k, v in chosen.items() if v and v not in p.options[k]]
        if bad:
            error = f"{p.title} is not sold in {bad[0]} {chosen[bad[0]]!r}."
        action = form.get("action", "")
        if error is None and action not in ("buy", "cart"):
            error = "Press Buy now or Add to cart."
        if error is not None:
            valid = {k: v for k, v in chosen.items() if v in p.options[k]}
            page = pages.product_page(p, s.last_search, self._count(s), valid, error)
            return _html(400, page)
        options = tuple(sorted(chosen.items()))
        if action == "buy":  # Buy now checks out this item alone
            s.cart = [CartLine(p.id, options)]
            return self._get(s, "/checkout", {})
        for i, line in enumerate(s.cart):
            if (line.product_id, line.options) == (p.id, options):
                s.cart[i] = CartLine(p.id, options, line.quantity + 1)
                return self._get(s, "/cart", {})
        s.cart.append(CartLine(p.id, options))
        return self._get(s, "/cart", {})

    def _place(self, s: Session) -> Response:
        if s.orders:
            text = f"Order {s.orders[0].number} was already placed; one order per visit."
            return _html(409, pages.message_page("Order already placed", text, self._count(s)))
        if not s.cart:
            return _html(400, pages.checkout_page([], "Your cart is empty: nothing to order."))
        order = Order(len(s.orders) + 1, tuple(s.cart))
        s.orders.append(order)
        s.cart = []
        return self._get(s, f"/order/{order.number}", {})
