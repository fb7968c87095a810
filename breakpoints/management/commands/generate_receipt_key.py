"""manage.py generate_receipt_key [--kid KID]: prints a new receipt signing key (a private
Ed25519 JWK with a kid) as one JSON line, for BPM_RECEIPT_KEYS."""

import json

from django.core.management.base import BaseCommand

from core.receipts import key_generate


class Command(BaseCommand):
    help = (
        "Print a new private key for signing receipts (a JWK with a kid). Put it first in "
        "BPM_RECEIPT_KEYS to sign with it; keep older keys after it so their receipts verify."
    )

    def add_arguments(self, parser):
        parser.add_argument("--kid", default=None, help="The key id (default: bpm-<random>).")

    def handle(self, *args, kid: str | None, **options):
        self.stderr.write(
            "A private key: store it as a secret. BPM_RECEIPT_KEYS='[<this>, <older keys>]'"
        )
        self.stdout.write(json.dumps(key_generate(kid)))
