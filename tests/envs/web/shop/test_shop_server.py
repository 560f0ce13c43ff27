"""``python -m agentgym.envs.web.shop``: the shop on a real HTTP server."""

from __future__ import annotations

import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from agentgym.envs.web.shop.__main__ import make_server


@pytest.fixture
def base() -> Iterator[str]:
    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_search_product_and_order_over_http(base: str) -> None:
    with urllib.request.urlopen(f"{base}/search?q=dome+tent") as r:
        html = r.read().decode()
    assert r.status == 200
    assert "dome tent" in html.lower()
    product_id = html.split('href="/product/')[1].split('"')[0]
    with urllib.request.urlopen(f"{base}/product/{product_id}") as r:
        page = r.read().decode()
    options = {}
    for chunk in page.split('name="option:')[1:]:
        name = chunk.split('"')[0]
        options[f"option:{name}"] = chunk.split('<option value="')[2].split('"')[0]
    form = urllib.parse.urlencode({"product": product_id, "action": "buy", **options}).encode()
    with urllib.request.urlopen(f"{base}/cart/add", data=form) as r:
        assert "Place order" in r.read().decode()
    with urllib.request.urlopen(f"{base}/checkout/place", data=b"") as r:
        assert "Order 1 placed" in r.read().decode()
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{base}/product/NOPE")
    assert info.value.code == 404
