"""GET /.well-known/jwks.json: the public keys that verify the service's receipts.

Public (no credentials): a receipt travels to whoever must check it, with any JOSE
library or tool. Lists every configured key (core.receipt_keys), so receipts signed
before a rotation still verify.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.receipt_keys import published_jwks


class ReceiptJwkSerializer(serializers.Serializer):
    """One public key (RFC 8037: an Ed25519 key is kty OKP, crv Ed25519)."""

    kty = serializers.ChoiceField(choices=["OKP"])
    crv = serializers.ChoiceField(choices=["Ed25519"])
    x = serializers.CharField(help_text="The public key (base64url).")
    kid = serializers.CharField(help_text="The key id a receipt's header names.")
    alg = serializers.ChoiceField(choices=["EdDSA"])
    use = serializers.ChoiceField(choices=["sig"])


class JwksSerializer(serializers.Serializer):
    keys = ReceiptJwkSerializer(many=True, help_text="The signing key first, then older ones.")


class JwksView(APIView):
    """Public and unthrottled, like the probes: a small document that changes only when
    the keys do (and says so to caches)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(
        operation_id="receipt_keys",
        summary="The public keys of signed receipts (JWKS)",
        description="A JWK Set (RFC 7517) of the Ed25519 keys that sign `result.receipt`: "
        "find the key by the receipt's `kid` and verify the compact JWS (alg EdDSA). "
        "Old keys stay listed after a rotation.",
        tags=["receipts"],
        auth=[],
        responses={200: JwksSerializer},
    )
    def get(self, request: Request) -> Response:
        response = Response(published_jwks())
        response["Cache-Control"] = "public, max-age=300"
        return response
