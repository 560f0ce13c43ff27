"""BM25 search over the catalogue, in pure Python (Robertson and Zaragoza's Okapi BM25)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from agentgym.envs.web.shop.catalog import Product

__all__ = ["PAGE_SIZE", "SearchIndex", "tokenize"]

PAGE_SIZE = 10
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"a", "an", "and", "by", "for", "i", "in", "me", "need", "of", "the", "with"})


def _stem(word: str) -> str:
    """A crude plural folding (jackets -> jacket, shoes -> shoe); enough for this catalogue."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words, plurals folded, a few stop words dropped."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP]


class SearchIndex:
    """BM25 (k1, b) over each product's title, type, category, attributes and description."""

    def __init__(self, products: Sequence[Product], k1: float = 1.2, b: float = 0.75) -> None:
        self.products = tuple(products)
        self.k1, self.b = k1, b
        self._tf: list[Counter[str]] = []
        for p in self.products:
            text = " ".join((p.title, p.product_type, p.category, *p.attributes, p.description))
            self._tf.append(Counter(tokenize(text)))
        self._lengths = [sum(tf.values()) for tf in self._tf]
        self._avg = sum(self._lengths) / max(1, len(self._lengths))
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self.products)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self._postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self._tf):
            for term in tf:
                self._postings.setdefault(term, []).append(i)

    def scores(self, query: str) -> dict[int, float]:
        """BM25 score of every product that shares a term with ``query`` (by index)."""
        out: dict[int, float] = {}
        for term in set(tokenize(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for i in self._postings[term]:
                f = self._tf[i][term]
                norm = self.k1 * (1 - self.b + self.b * self._lengths[i] / self._avg)
                out[i] = out.get(i, 0.0) + idf * f * (self.k1 + 1) / (f + norm)
        return out

    def search(self, query: str) -> list[Product]:
        """Every matching product, best first (ties by catalogue order)."""
        scored = self.scores(query)
        order = sorted(scored, key=lambda i: (-scored[i], i))
        return [self.products[i] for i in order]

    def page(self, query: str, page: int) -> tuple[list[Product], int]:
        """Results page ``page`` (from 1) of ``query`` and the number of results."""
        results = self.search(query)
        start = (max(1, page) - 1) * PAGE_SIZE
        return results[start : start + PAGE_SIZE], len(results)
