"""A model for the OpenAI Agents SDK that answers from a script (no network, no LLM):
each turn either calls tools or says a final text. It implements the SDK's `Model`
interface and records what the run sent it, so a test reads what the model was told
(a tool's output, a rejection's message)."""

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = ""

    def __post_init__(self) -> None:
        self.call_id = self.call_id or f"call_{uuid.uuid4().hex}"  # unique: it keys the breakpoint


class ScriptedModel(Model):
    """Turn i answers with script[i]: a list of ToolCall, or a str (the final output)."""

    def __init__(self, *script: list[ToolCall] | str):
        self.script = list(script)
        self.inputs: list[Any] = []  # what each turn was given

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):
        self.inputs.append(input)
        assert self.script, "the run asked the model for more turns than scripted"
        turn = self.script.pop(0)
        if isinstance(turn, str):
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"msg_{uuid.uuid4().hex}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=turn, annotations=[])],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{call.call_id}",
                    call_id=call.call_id,
                    name=call.name,
                    arguments=json.dumps(call.arguments),
                    status="completed",
                )
                for call in turn
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run without streaming")

    def tool_outputs(self) -> dict[str, str]:
        """The tool outputs the model was given, by call id (from every turn's input)."""
        outputs: dict[str, str] = {}
        for given in self.inputs:
            for item in given if isinstance(given, list) else []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    outputs[item["call_id"]] = str(item["output"])
        return outputs
