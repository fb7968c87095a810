"""The error envelope every API error uses, as the OpenAPI document shows it."""

from rest_framework import serializers

from web.api.schema import ERROR_CODES


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=list(ERROR_CODES),
        help_text="validation_error (400), not_authenticated (401), permission_denied (403), "
        "not_found (404), method_not_allowed (405), not_acceptable (406), invalid_state, "
        "idempotency_conflict and conflict (409), payload_too_large (413), unsupported_media_type (415), "
        "throttled (429), server_error (500), unavailable (503).",
    )
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    """The error envelope every API error uses."""

    error = ErrorBodySerializer()
