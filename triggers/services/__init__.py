"""Every write of the triggers app.

- ingest: receiving an event (verify, parse, store once, publish)
- evaluate: the worker's evaluation of an event against the rules (and the dry run)
- config: admins' writes of event sources and trigger rules
"""

from triggers.services.config import rule_add, rule_remove, source_add, source_set_enabled
from triggers.services.evaluate import (
    evaluate_rule,
    event_evaluate,
    events_due,
    events_published,
)
from triggers.services.ingest import event_receive

__all__ = [
    "evaluate_rule",
    "event_evaluate",
    "event_receive",
    "events_due",
    "events_published",
    "rule_add",
    "rule_remove",
    "source_add",
    "source_set_enabled",
]
