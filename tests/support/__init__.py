"""Helpers the tests share, each written once: import them from here (tests.support.*)."""
