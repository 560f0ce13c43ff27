from tinycache import hashkey, methodkey, typedkey


def test_hashkey_of_positional_arguments_is_the_tuple():
    assert hashkey(1, "a") == (1, "a")


def test_keyword_order_does_not_matter():
    assert hashkey(1, x=2, y=3) == hashkey(1, y=3, x=2)


def test_positional_and_keyword_calls_differ():
    assert hashkey(1, 2) != hashkey(1, x=2)


def test_keys_are_hashable():
    assert len({hashkey(1, x=2), hashkey(1, x=2), hashkey(1, x=3)}) == 2


def test_hashkey_does_not_tell_equal_numbers_apart():
    assert hashkey(1) == hashkey(1.0)


def test_typedkey_tells_types_apart():
    assert typedkey(1) != typedkey(1.0)
    assert typedkey(1) != typedkey(True)
    assert typedkey(1, "a") == typedkey(1, "a")


def test_methodkey_ignores_self():
    assert methodkey(object(), 1, x=2) == hashkey(1, x=2)


def test_typedkey_tells_keyword_argument_types_apart():
    assert typedkey(x=1) != typedkey(x=1.0)
    assert typedkey(1, x=True) != typedkey(1, x=1)
