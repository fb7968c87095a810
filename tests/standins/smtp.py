"""A local SMTP stand-in: a real SMTP server (aiosmtpd) on 127.0.0.1 that keeps what it
receives, and `use_smtp`, which points Django's real SMTP backend at it.

The `smtp` fixture of tests/channels/conftest.py starts one per test.
"""

from email import message_from_bytes, policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller

from tests.support.net import free_port

PUBLIC_URL = "http://testserver"  # BPM_PUBLIC_URL under use_smtp: the mailed links' base


class Inbox:
    """aiosmtpd handler: keeps every message; `refuse` answers RCPT with that reply instead."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.refuse = ""

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.refuse:
            return self.refuse
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 Message accepted for delivery"


class SmtpServer:
    """A real SMTP server on 127.0.0.1 (a free port), stoppable and restartable there."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        self.port = free_port()
        self.controller: Controller | None = None

    def start(self) -> "SmtpServer":
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    @property
    def messages(self) -> list[EmailMessage]:
        return self.inbox.messages


def use_smtp(settings, server: SmtpServer) -> None:
    """Point Django's real SMTP backend at the stand-in and turn the channel on."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = server.port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.DEFAULT_FROM_EMAIL = "breakpoints@example.com"
    settings.BPM_NOTIFY_EMAIL = True
    settings.BPM_PUBLIC_URL = PUBLIC_URL
