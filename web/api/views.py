"""The API views' shared pieces: the error responses an operation declares, a body validated."""

from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request

from web.api.serializers import ErrorSerializer


def error_responses(*codes: int, invalid: str = "") -> dict:
    """Error responses of an operation; `invalid` names the input rules its 400 enforces
    that the request schema states only in words (rules between fields)."""
    descriptions = {
        400: "validation_error",
        401: "not_authenticated",
        403: "permission_denied",
        404: "not_found",
        409: "invalid_state, idempotency_conflict or conflict",
        413: "payload_too_large",
        429: "throttled (with Retry-After)",
        503: "unavailable (with Retry-After)",
    }
    if invalid:
        descriptions[400] = f"validation_error, among others when {invalid}"
    return {
        code: OpenApiResponse(ErrorSerializer, description=descriptions[code]) for code in codes
    }


def validated(serializer_class, request: Request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
