"""Fixtures of the channel tests: the SMTP stand-in (tests/standins/smtp.py)."""

from collections.abc import Iterator

import pytest

from tests.standins.smtp import SmtpServer, use_smtp


@pytest.fixture
def smtp(settings) -> Iterator[SmtpServer]:
    """A started SMTP stand-in that Django mails to; stopped after the test."""
    server = SmtpServer().start()
    use_smtp(settings, server)
    yield server
    server.stop()
