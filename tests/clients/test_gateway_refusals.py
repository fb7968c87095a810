"""A refusal the gateway answers reads as one sentence per thought (issue 48): a service's
message that ends with its own full stop is not given a second one."""

from bpm_client.errors import ValidationError
from bpm_client.gateway.decisions import refusal
from mcp.types import TextContent

SERVICE_MESSAGE = (
    "payload.form: $schema: Only JSON Schema draft 2020-12 "
    "(https://json-schema.org/draft/2020-12/schema)."
)


def text_of(result) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def test_a_service_message_ending_with_a_full_stop_gets_no_second_one():
    error = ValidationError(SERVICE_MESSAGE, status_code=400)

    answer = refusal("write_file", f"could not ask for approval: {error}")

    assert answer.is_error
    assert text_of(answer) == (
        "`write_file` was not run: could not ask for approval: validation_error: "
        f"{SERVICE_MESSAGE} Nothing was sent to the tool."
    )


def test_a_reason_without_a_full_stop_is_given_one():
    answer = refusal("drop_table", "denied by the gateway's rules")

    assert text_of(answer) == (
        "`drop_table` was not run: denied by the gateway's rules. Nothing was sent to the tool."
    )
