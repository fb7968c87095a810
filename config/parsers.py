"""Request body parsing: DRF's JSON parser, with JSON nested beyond Python's reach refused as 400."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            # json raises RecursionError, not ValueError, on deep nesting: a 500 otherwise.
            raise ParseError("JSON parse error - nested too deeply.") from None
