"""Models of the breakpoints app: the breakpoint and the feedback given on it."""

from breakpoints.models.breakpoint import Breakpoint, new_breakpoint_id
from breakpoints.models.feedback import Feedback

__all__ = ["Breakpoint", "Feedback", "new_breakpoint_id"]
