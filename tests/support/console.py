"""The reviewer console (Django admin) through a browser-like test client."""

from django.contrib.messages import get_messages
from django.test import Client


def session_client(user) -> Client:
    """A test client logged in as `user` (a session, as a browser has)."""
    client = Client()
    client.force_login(user)
    return client


def messages(response) -> list[str]:
    """The console's flash messages on this response."""
    return [str(m) for m in get_messages(response.wsgi_request)]
