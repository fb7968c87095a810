"""An event source's generated secret has the form its kind's senders expect.

Standard Webhooks secrets are the spec's `whsec_` + base64 of random bytes, which the
README's openssl recipe (and the standardwebhooks libraries) decode into the HMAC key;
a secret without the prefix (generated before) still verifies, as its UTF-8 bytes.
"""

import base64
import hashlib
import hmac
import os
import secrets
import string
import subprocess
import time

import pytest
from rest_framework.test import APIClient

from triggers.models import EventSource, ExternalEvent

SOURCES, EVENTS = "/api/event-sources", "/api/events"
BODY = '{"type":"invoice.paid","data":{"invoice":"inv_1","run":"abc123"}}'
# The README's "With openssl (a `whsec_` secret)" recipe under Standard Webhooks, line for
# line; the test sets BILLING_SECRET, ID, TS and BODY as its first lines do, and the
# signature is printed instead of sent with curl.
OPENSSL_RECIPE = r"""
KEY_HEX=$(printf '%s' "${BILLING_SECRET#whsec_}" | openssl base64 -d -A | od -An -tx1 | tr -d ' \n')
SIG="v1,$(printf '%s.%s.%s' "$ID" "$TS" "$BODY" \
  | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$KEY_HEX" -binary | openssl base64 -A)"
printf '%s' "$SIG"
"""
URL_SAFE = set(string.ascii_letters + string.digits + "-_")


def openssl_signature(secret: str, delivery: str, stamp: int) -> str:
    env = {"BILLING_SECRET": secret, "ID": delivery, "TS": str(stamp), "BODY": BODY}
    result = subprocess.run(
        ["sh", "-c", OPENSSL_RECIPE],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout


def deliver(source: str, secret: str, sign=openssl_signature):
    delivery, stamp = f"msg_{secrets.token_hex(16)}", int(time.time())
    return APIClient().post(
        f"{EVENTS}/{source}",
        data=BODY,
        content_type="application/json",
        headers={
            "webhook-id": delivery,
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, delivery, stamp),
        },
    )


def create_source(admin_client, name: str, kind: str) -> str:
    response = admin_client.post(SOURCES, {"name": name, "kind": kind}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["secret"]


def test_a_new_standard_webhooks_secret_is_whsec_and_the_readme_openssl_recipe_signs(
    admin_client,
):
    secret = create_source(admin_client, "billing", "standard-webhooks")

    assert secret.startswith("whsec_")
    key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)  # standard base64
    assert len(key) == 32
    response = deliver("billing", secret)
    assert response.status_code == 202, response.content
    assert ExternalEvent.objects.get().type == "invoice.paid"


def _utf8_key_signature(secret: str, delivery: str, stamp: int) -> str:
    """How a secret without whsec_ is used: its UTF-8 bytes are the key (the README)."""
    message = f"{delivery}.{stamp}.{BODY}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def test_an_old_style_secret_without_the_prefix_still_verifies(db):
    old_secret = secrets.token_urlsafe(32)  # what sources were given before
    EventSource.objects.create(name="billing", kind="standard-webhooks", secret=old_secret)

    response = deliver("billing", old_secret, sign=_utf8_key_signature)

    assert response.status_code == 202, response.content
    assert ExternalEvent.objects.filter(source__name="billing").count() == 1


def test_a_whsec_secret_is_not_verified_as_its_text(admin_client):
    """The prefix decides: a whsec_ secret's key is its decoded bytes, never its text."""
    secret = create_source(admin_client, "billing", "standard-webhooks")

    response = deliver("billing", secret, sign=_utf8_key_signature)

    assert response.status_code == 401, response.content


@pytest.mark.parametrize("kind", ["github", "gitlab", "generic-hmac"])
def test_other_kinds_get_url_safe_text_used_as_is(admin_client, kind):
    """GitHub, GitLab and generic HMAC senders use the secret's text as key or token: no
    prefix, nothing to decode, characters that paste into any settings page or shell."""
    secret = create_source(admin_client, "src", kind)

    assert not secret.startswith("whsec_")
    assert len(secret) >= 43 and set(secret) <= URL_SAFE
