"""The API views' shared pieces: the error responses an operation declares, a body validated."""

import threading
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.serializers import Serializer
from rest_framework.utils.serializer_helpers import BindingDict

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


def validated(serializer_class: type[Serializer], request: Request) -> dict:
    """The request's body validated by `serializer_class` (a 400 when it is not valid).

    DRF deep-copies a serializer's declared fields for every instance (a field built again
    for each: a tenth of a small write's time). Here each thread builds a class's fields
    once and hands them to each new serializer of that class: a field keeps nothing of a
    validation but its parent (set to the new serializer), and a thread validates one
    body at a time."""
    serializer = serializer_class(data=request.data)
    built: dict[Any, BindingDict] = _fields_built.__dict__
    fields = built.get(serializer_class)
    if fields is None:
        built[serializer_class] = serializer.fields
    else:
        fields.serializer = serializer
        for field in fields.values():
            field.parent = serializer
        serializer.__dict__["fields"] = fields  # Serializer.fields is a cached_property
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# Per thread: each serializer class's fields, built once (validated()).
_fields_built = threading.local()
