"""The OpenAPI schema of the create request's `payload` (babysitter's ctx.breakpoint()).

Documentation only: breakpoints.payload.validation validates; every bound comes from limits.
"""

from breakpoints.payload.validation import KEY_PATTERN
from core import limits
from core.choices import FileFormat, OnTimeout, Strategy
from policies.api.schema import AUTO_APPROVE_AFTER_N_SCHEMA, ESCALATE_TO_DESCRIPTION
from web.api.schema import NOT_BLANK


def _nullable(schema: dict) -> dict:
    return {**schema, "nullable": True}


def text_schema(max_length: int) -> dict:
    return {"type": "string", "pattern": NOT_BLANK, "maxLength": max_length}


# Rules that tie one key to another are said in words (and enforced with a 400 by
# breakpoints.payload.validation), never as anyOf/oneOf/not: code generators cannot express those
# and drop or mangle the object's own properties (openapi-python-client did).

FORMAT_DESCRIPTION = (
    "How the console shows the file. When omitted (or null) it is inferred from the path's "
    "extension: .md/.markdown markdown, .html/.htm html, known source extensions (and "
    "Dockerfile, Makefile) code with their language, anything else text. The payload is "
    "stored as sent."
)

# The keys of babysitter's ctx.breakpoint() argument that breakpoints.payload.validation validates; any
# other key is kept as sent.
PAYLOAD_SCHEMA = {
    "type": "object",
    "description": "The ctx.breakpoint() argument, any JSON object; these keys are validated.",
    "properties": {
        "question": {"type": "string", "maxLength": limits.MAX_QUESTION_LENGTH},
        "title": _nullable({"type": "string", "maxLength": limits.MAX_TITLE_LENGTH}),
        "breakpointId": {
            "type": "string",
            "maxLength": limits.MAX_KEY_LENGTH,
            "pattern": KEY_PATTERN.pattern,
            "description": "The canonical key: dotted kebab-case.",
        },
        "strategy": {"type": "string", "enum": list(Strategy.values)},
        "attempt": {"type": "integer", "minimum": 1},
        "autoApproveAfterN": AUTO_APPROVE_AFTER_N_SCHEMA,
        "presentAlwaysApprove": {"type": "boolean"},
        "preventSelfReview": {
            "type": "boolean",
            "nullable": True,
            "description": "Refuse a decision by the person named in requestedBy (four eyes). "
            "It can only add the rule: a route's default or BPM_PREVENT_SELF_REVIEW still holds.",
        },
        "onTimeout": {
            "type": "string",
            "nullable": True,
            "enum": [*OnTimeout.values, None],
            "description": "When nobody decides before expiresAt: expire (default), approve "
            "or reject (responder `timeout-policy`; approve obeys never-auto-approve rules and "
            "always-break-on tags, else expires), escalate (route also to escalateTo and wait "
            "one more TTL).",
        },
        "escalateAfterSeconds": {
            "type": "integer",
            "nullable": True,
            "minimum": 1,
            "maximum": limits.MAX_TTL_SECONDS,
            "description": "After this long, route it also to escalateTo (audited `escalated`).",
        },
        "escalateTo": _nullable(
            {**text_schema(limits.MAX_EXPERT_NAME_LENGTH), "description": ESCALATE_TO_DESCRIPTION}
        ),
        "remindEverySeconds": {
            "type": "integer",
            "nullable": True,
            "minimum": limits.MIN_REMIND_EVERY_SECONDS,
            "maximum": limits.MAX_TTL_SECONDS,
            "description": f"Notify its channels again this often while it waits (at most "
            f"{limits.MAX_REMINDERS} reminders).",
        },
        "previousFeedback": _nullable(
            {"type": "string", "maxLength": limits.MAX_PREVIOUS_FEEDBACK_LENGTH}
        ),
        "tags": _nullable(
            {
                "type": "array",
                "maxItems": limits.MAX_TAGS,
                "items": text_schema(limits.MAX_TAG_LENGTH),
            }
        ),
        "expert": _nullable(
            {
                "anyOf": [
                    text_schema(limits.MAX_EXPERT_NAME_LENGTH),
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": limits.MAX_EXPERTS,
                        "items": text_schema(limits.MAX_EXPERT_NAME_LENGTH),
                    },
                ]
            }
        ),
        "options": _nullable(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": limits.MAX_OPTIONS,
                "description": "Labels, or {label, approved} objects (labels of objects unique).",
                "items": {
                    "anyOf": [
                        text_schema(limits.MAX_OPTION_LENGTH),
                        {
                            "type": "object",
                            "required": ["label"],
                            "properties": {
                                "label": text_schema(limits.MAX_OPTION_LENGTH),
                                "approved": {"type": "boolean"},
                            },
                        },
                    ]
                },
            }
        ),
        "form": {
            "type": "object",
            "nullable": True,
            "additionalProperties": True,
            "description": "The answer the reviewer gives: a JSON Schema (draft 2020-12, "
            "2019-09 or draft-07, read as 2020-12) of "
            f"type object, at most {limits.MAX_FORM_BYTES} bytes and {limits.MAX_FORM_DEPTH} "
            "levels; $ref only to its own $defs (nothing is fetched), no patternProperties, "
            f"each pattern at most {limits.MAX_FORM_PATTERN_LENGTH} characters, matched by RE2 "
            "(linear time: no back-references, no lookarounds); a $ref/allOf graph that "
            f"would apply more than {limits.MAX_FORM_EXPANSION} schemas along one path is "
            "refused; format is not asserted. A reviewer's values are validated against it, "
            "within a budget (BPM_FORM_VALIDATION_STEPS).",
        },
        "proposal": {
            "type": "object",
            "nullable": True,
            "additionalProperties": True,
            "description": "The values the agent proposes (validated against form; without a "
            "form, any JSON object, edited as JSON). An approval without values, and every "
            "automatic approval, approves it as it is.",
        },
        "context": _nullable(
            {
                "type": "object",
                "properties": {
                    "runId": _nullable({"type": "string", "maxLength": limits.MAX_RUN_ID_LENGTH}),
                    "files": _nullable(
                        {
                            "type": "array",
                            "maxItems": limits.MAX_FILES,
                            "items": {
                                "type": "object",
                                "required": ["path"],
                                "properties": {
                                    "path": {
                                        **text_schema(limits.MAX_PATH_LENGTH),
                                        "description": "Relative, without '..'.",
                                    },
                                    "format": {
                                        "type": "string",
                                        "nullable": True,
                                        "enum": [*FileFormat.values, None],
                                        "description": FORMAT_DESCRIPTION,
                                    },
                                    "language": _nullable(
                                        {
                                            "type": "string",
                                            "maxLength": limits.MAX_LANGUAGE_LENGTH,
                                            "description": "A code file's language (a "
                                            "Pygments name); by default its extension's.",
                                        }
                                    ),
                                    "content": _nullable(
                                        {
                                            "type": "string",
                                            "maxLength": limits.MAX_CONTENT_LENGTH,
                                        }
                                    ),
                                },
                            },
                        }
                    ),
                },
            }
        ),
    },
}
