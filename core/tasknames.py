"""Every Celery task's name, in one place.

The names are stored outside the code (messages in flight carry them, and so do
django-celery-beat's schedule rows), so they stay as they were first published, whichever
app runs the task now: never rename one. Publishers (the outboxes) send by these names
without importing the tasks; each task module registers its tasks under them, and the beat
schedule (config.settings) names them.
"""

# breakpoints
EXPIRE_DUE = "breakpoints.tasks.expire_due_breakpoints"
NUDGE_WAITING = "breakpoints.tasks.nudge_waiting_breakpoints"
PURGE_FINISHED = "breakpoints.tasks.purge_finished_breakpoints"
REFRESH_DECISION_TIMES = "breakpoints.tasks.refresh_decision_times"
# grants
EXPIRE_GRANTS = "grants.tasks.expire_due_grants"
# notifications: the webhook outbox (published before the apps were split, under breakpoints)
DELIVER = "breakpoints.tasks.deliver_webhook"
# Several deliveries published as one message; the worker hands each on as DELIVER.
DELIVER_MANY = "notifications.tasks.deliver_many"
DISPATCH_DUE_DELIVERIES = "breakpoints.tasks.dispatch_due_webhooks"
# triggers: the events' outbox
EVALUATE_EVENT = "triggers.tasks.evaluate_event"
DISPATCH_DUE_EVENTS = "triggers.tasks.dispatch_due_events"

# The queues, by name (the Procfile's workers consume them by these names: never rename
# one). Every task goes to DEFAULT_QUEUE but the evaluation of external events, which has
# a queue (and workers) of its own: costly trigger rules never hold back the sweeps and
# the webhook deliveries (config.settings' CELERY_TASK_ROUTES).
DEFAULT_QUEUE = "celery"
TRIGGERS_QUEUE = "triggers"
QUEUE_OF = {EVALUATE_EVENT: TRIGGERS_QUEUE}

PUBLISHED = frozenset(
    {
        EXPIRE_DUE,
        NUDGE_WAITING,
        PURGE_FINISHED,
        REFRESH_DECISION_TIMES,
        EXPIRE_GRANTS,
        DELIVER,
        DELIVER_MANY,
        DISPATCH_DUE_DELIVERIES,
        EVALUATE_EVENT,
        DISPATCH_DUE_EVENTS,
    }
)
