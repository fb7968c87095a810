"""The breakpoints API's own input rules in the OpenAPI document (a postprocessing hook)."""

from breakpoints.filters import BreakpointFilter
from core.limits import MAX_BATCH_DECISIONS
from web.api.schema import UTC_OFFSET_IN_RANGE


def input_rules(result, generator, request, public):
    """POSTPROCESSING_HOOK: the input rules below, after web.api.schema's hook."""
    declare_input_rules(result)
    return result


def declare_input_rules(result: dict) -> None:
    """Input rules the serializers cannot say by themselves.

    A rule that ties one field to another (a comment unless release is true) is said in
    the field's description and answered with a 400, never as anyOf/oneOf: generators such
    as openapi-python-client cannot express such unions and drop the operation.
    """
    schemas = result.get("components", {}).get("schemas", {})
    feedback = result["paths"].get("/api/breakpoints/{id}/feedback", {}).get("post", {})
    if "requestBody" in feedback:
        feedback["requestBody"]["required"] = True  # a comment, or release: true
    # A rule's pattern takes blank text only to report "pattern is empty" itself: the
    # pattern's grammar, not drf-spectacular's "or blank" alternative, says what is valid.
    pattern = schemas.get("RuleCreateRequest", {}).get("properties", {}).get("pattern", {})
    if "oneOf" in pattern:
        pattern.update(pattern.pop("oneOf")[0])
    # A batch's 1 to MAX_BATCH_DECISIONS items (a ListSerializer's lengths, not mapped).
    items = schemas.get("DecisionsBatchRequest", {}).get("properties", {}).get("items")
    if items is not None:
        items.update(minItems=1, maxItems=MAX_BATCH_DECISIONS)
    # The list's filters (django-filter) take an empty value as "not given".
    operation = result["paths"].get("/api/breakpoints", {}).get("get", {})
    for parameter in operation.get("parameters", []):
        if (
            parameter.get("in") == "query"
            and parameter["name"] in BreakpointFilter.base_filters
            and parameter["schema"].get("type") != "array"  # tag= is a list with one blank
        ):
            parameter["allowEmptyValue"] = True
        if parameter["name"] in ("createdAfter", "createdBefore"):
            parameter["schema"]["pattern"] = UTC_OFFSET_IN_RANGE
            parameter["description"] = "An ISO 8601 date-time; UTC offset within ±15:59."
