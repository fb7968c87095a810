"""Models of the breakpoints app, one module each."""

from breakpoints.models.breakpoint import Breakpoint, new_breakpoint_id
from breakpoints.models.token import ApiToken

__all__ = ["ApiToken", "Breakpoint", "new_breakpoint_id"]
