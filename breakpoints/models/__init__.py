"""Models of the breakpoints app: the breakpoint, the feedback given on it, and how long
decisions take (the aggregate behind expectedDecision)."""

from breakpoints.models.breakpoint import Breakpoint, new_breakpoint_id
from breakpoints.models.decision_time import DecisionBasis, DecisionTimeStat
from breakpoints.models.feedback import Feedback

__all__ = ["Breakpoint", "DecisionBasis", "DecisionTimeStat", "Feedback", "new_breakpoint_id"]
