"""Make a VAPID key pair for Web Push (channels/push): the private key for
BPM_VAPID_PRIVATE_KEY, and the public one browsers subscribe with (derived from it)."""

import base64

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management.base import BaseCommand


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Command(BaseCommand):
    help = (
        "Print a new VAPID key pair for Web Push: set BPM_VAPID_PRIVATE_KEY to the private "
        "key (the public key is derived from it; it is printed for reference)."
    )

    def handle(self, *args, **options) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        private = key.private_numbers().private_value.to_bytes(32, "big")
        public = key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        self.stdout.write(f"BPM_VAPID_PRIVATE_KEY={_base64url(private)}")
        self.stdout.write(f"# public key (applicationServerKey): {_base64url(public)}")
