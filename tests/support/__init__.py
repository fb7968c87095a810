"""Helpers the tests share, each written once: import them from here (tests.support.*).

Their asserts are rewritten by pytest like a test's own (a failing helper shows its values),
whether a test imports them or registers them as a plugin (`pytest_plugins`)."""

import pkgutil

import pytest

pytest.register_assert_rewrite(
    *(f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__))
)
