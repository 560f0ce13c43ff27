import pytest

from tinycache import LRUCache


def test_holds_at_most_maxsize_items():
    cache = LRUCache(maxsize=2)
    cache["a"], cache["b"], cache["c"] = 1, 2, 3
    assert list(cache) == ["b", "c"]
    assert len(cache) == 2


def test_overwriting_a_key_does_not_grow_the_cache():
    cache = LRUCache(maxsize=2)
    cache["a"] = 1
    cache["a"] = 2
    assert dict(cache.items()) == {"a": 2}


def test_writing_refreshes_an_item():
    cache = LRUCache(maxsize=2)
    cache["a"], cache["b"] = 1, 2
    cache["a"] = 10
    cache["c"] = 3
    assert set(cache) == {"a", "c"}


def test_peek_and_contains_do_not_refresh():
    cache = LRUCache(maxsize=2)
    cache["a"], cache["b"] = 1, 2
    assert cache.peek("a") == 1
    assert "a" in cache
    cache["c"] = 3
    assert "a" not in cache
    assert cache.peek("a", "gone") == "gone"


def test_missing_key_raises_key_error_and_get_returns_default():
    cache = LRUCache(maxsize=2)
    with pytest.raises(KeyError):
        cache["nope"]
    assert cache.get("nope", 0) == 0


def test_popitem_returns_the_least_recently_used_and_calls_on_evict():
    evicted = []
    cache = LRUCache(maxsize=3, on_evict=lambda k, v: evicted.append((k, v)))
    cache["a"], cache["b"] = 1, 2
    assert cache.popitem() == ("a", 1)
    cache["c"], cache["d"], cache["e"] = 3, 4, 5
    assert evicted == [("a", 1), ("b", 2)]


def test_delete_and_clear_do_not_call_on_evict():
    evicted = []
    cache = LRUCache(maxsize=3, on_evict=lambda k, v: evicted.append(k))
    cache["a"], cache["b"] = 1, 2
    del cache["a"]
    cache.clear()
    assert len(cache) == 0
    assert evicted == []


def test_maxsize_zero_stores_nothing():
    cache = LRUCache(maxsize=0)
    cache["a"] = 1
    assert "a" not in cache


def test_negative_maxsize_is_rejected():
    with pytest.raises(ValueError, match="maxsize must be >= 0, got -1"):
        LRUCache(maxsize=-1)


def test_repr():
    cache = LRUCache(maxsize=4)
    cache["a"] = 1
    assert repr(cache) == "LRUCache(maxsize=4, currsize=1)"


def test_reading_keeps_an_item_alive():
    cache = LRUCache(maxsize=2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1
    cache["c"] = 3
    assert set(cache) == {"a", "c"}


def test_get_keeps_an_item_alive():
    cache = LRUCache(maxsize=3)
    cache["a"], cache["b"], cache["c"] = 1, 2, 3
    cache.get("a")
    cache.get("b")
    cache["d"] = 4
    assert list(cache) == ["a", "b", "d"]
