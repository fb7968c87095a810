"""JSON already written (by the database), to be embedded in an answer as it is.

A list page passes its breakpoints' JSON columns through this way instead of parsing them
into Python objects and writing them out again: the API's renderer
(web.api.renderers) embeds the text with orjson.Fragment; its standard-library path
(pretty-printed answers, the browsable API) parses it first. The text must be one valid
JSON value: what PostgreSQL's jsonb (or Django's JSONField on SQLite) gives back is.
"""

import json
from typing import Any

import orjson


class RawJSON:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawJSON({self.text!r})"

    def fragment(self) -> orjson.Fragment:
        return orjson.Fragment(self.text)

    def parsed(self) -> Any:
        return json.loads(self.text)
