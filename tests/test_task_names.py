"""Celery task names are stored outside the code: django-celery-beat's schedule rows and
messages in flight carry them. Moving a task's code between apps must not change them."""

from config.celery import app
from core import tasknames

# The names as they were first published (before the apps were split, issue 20), written
# out here so that a change to core.tasknames shows up as a failing test.
PUBLISHED = {
    "breakpoints.tasks.deliver_webhook",
    "breakpoints.tasks.dispatch_due_webhooks",
    "breakpoints.tasks.expire_due_breakpoints",
    "breakpoints.tasks.nudge_waiting_breakpoints",
    "breakpoints.tasks.purge_finished_breakpoints",
    "breakpoints.tasks.refresh_decision_times",
    "grants.tasks.expire_due_grants",
    "notifications.tasks.deliver_many",
    "triggers.tasks.dispatch_due_events",
    "triggers.tasks.evaluate_event",
}


def test_every_published_task_name_is_still_registered():
    app.loader.import_default_modules()
    registered = {name for name in app.tasks if not name.startswith("celery.")}
    assert PUBLISHED <= registered, sorted(PUBLISHED - registered)


def test_the_beat_schedule_names_registered_tasks():
    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert scheduled and scheduled <= set(app.tasks), sorted(scheduled - set(app.tasks))


def test_every_task_is_named_in_core_tasknames_and_nothing_else_is_registered():
    """One module names the tasks: each project task is registered under one of its names,
    and it names no task that is not registered (a module would have dropped one)."""
    app.loader.import_default_modules()
    # Celery's own, and the suite's (tests.live.embedded_broker_tasks, once a test imported it).
    registered = {name for name in app.tasks if not name.startswith(("celery.", "tests."))}
    assert tasknames.PUBLISHED == PUBLISHED
    assert registered == set(tasknames.PUBLISHED)
