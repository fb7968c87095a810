"""OpenAPI: the bearer-token scheme (imported in AppConfig.ready), path post-processing, and
the pieces schemas are built of (a text that is not blank, a shape of a route's channel spec)."""

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema

from core.channels import EXPERTS

# Text that is not blank once trimmed: a character Python's str.strip() keeps (it also
# strips \x1c-\x1f and \x85, which the schema's \s does not cover).
NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
# PostgreSQL's timestamptz takes UTC offsets up to 15:59 either way (breakpoints.filters).
UTC_OFFSET_IN_RANGE = r"([Zz]|[+-](0[0-9]|1[0-5]):[0-5][0-9])$"

# "to": "experts" in a channel spec (core.channels).
EXPERTS_VALUE = {"type": "string", "enum": [EXPERTS]}


def text_schema(max_length: int, description: str = "") -> dict[str, Any]:
    """A text that is not blank, of at most `max_length` characters."""
    schema = {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": NOT_BLANK}
    return {**schema, "description": description} if description else schema


def spec_shape(title: str, kind: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One shape of a route's channel spec: its kind and one key (core.channels)."""
    return {
        "title": title,
        "type": "object",
        "required": ["kind", key],
        "additionalProperties": False,
        "properties": {"kind": {"type": "string", "enum": [kind]}, key: value},
    }


# Every code of the error envelope, with its status (the schema's one list of them).
ERROR_CODES = {
    "validation_error": 400,
    "not_authenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "request_timeout": 408,
    "invalid_state": 409,
    "idempotency_conflict": 409,
    "conflict": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "throttled": 429,
    "server_error": 500,
    "unavailable": 503,
}

# Errors any API operation can answer, whatever the view: the body size limit and a
# malformed Content-Length (middleware), authentication, the rate limits.
_ANY_OPERATION = {
    "400": "validation_error: invalid input (or a malformed Content-Length).",
    "401": "not_authenticated: no credentials, or a token that is unknown or revoked.",
    "413": "payload_too_large: the request body is over BPM_MAX_BODY_BYTES.",
    "429": "throttled: too many requests (or bad tokens, or bodies arriving at once from one "
    "address) for now; retry after Retry-After seconds.",
}
# Operations that read a JSON body also refuse one that is slow to arrive, or not JSON.
_WITH_BODY = {
    "408": "request_timeout: the body did not arrive within BPM_BODY_READ_SECONDS.",
    "415": "unsupported_media_type: the body is not application/json.",
}
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 0},
        "description": "Seconds to wait before trying again.",
    }
}
_METHODS = {"get", "put", "post", "patch", "delete", "head", "options", "trace"}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent token (create_agent_token, `bpma_…`) or a personal "
            "token (create_user_token, `bpmu_…`): `Authorization: Bearer <token>`. Tokens "
            "issued before the checksummed form (`bpm_…`) keep working.",
        }


class StrictCharFieldScheme(OpenApiSerializerFieldExtension):
    """A trimmed text field that may not be blank needs a character str.strip() keeps."""

    target_class = "web.api.fields.StrictCharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        field = self.target
        if (
            direction == "request"
            and field.trim_whitespace
            and not field.allow_blank
            and schema.get("type") == "string"
            and "pattern" not in schema
        ):
            schema["pattern"] = NOT_BLANK
        return schema


class EnvelopedListSchema(AutoSchema):
    """For viewsets whose `list` answers an object (`{"results": [...]}`), not a bare array.

    drf-spectacular wraps the response of any `list` action in an array; give such a
    `list` an explicit operation_id (it is no longer named `…_list` by itself).
    """

    def _is_list_view(self, serializer: Any = None) -> bool:
        if getattr(self.view, "action", None) == "list":
            return False
        return super()._is_list_view(serializer)


def strip_trailing_slashes(result, generator, request, public):
    """POSTPROCESSING_HOOK: list paths as the contract writes them (/api/breakpoints/{id}/status).

    The router accepts both forms ("/?"), which drf-spectacular renders as a trailing slash.
    It also declares the errors common to every operation (see below); the input rules the
    serializers cannot state are breakpoints.api.schema's hook, next in the settings.
    """
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    declare_common_errors(result)
    return result


def declare_common_errors(result: dict) -> None:
    """Declare, on every API operation, the errors that come from outside its view.

    The views declare their own (404, 409…); the middleware and DRF add 400 (Content-Length),
    413 (body too large), 401, 429 (with Retry-After), and to those with a body 408 (too slow
    to arrive) and 415 (not JSON), to any of them. Every error uses the envelope (components/schemas/Error).
    """
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, item in result["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            common = dict(_ANY_OPERATION)
            if "requestBody" in operation:
                common.update(_WITH_BODY)
            for status, description in common.items():
                responses.setdefault(status, {"description": description, "content": error})
            if "429" in responses:
                responses["429"].setdefault("headers", {}).update(_RETRY_AFTER)
            if "503" in responses:
                responses["503"].setdefault("headers", {}).update(_RETRY_AFTER)
